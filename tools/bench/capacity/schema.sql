-- Tables for capacity.sh. `rowt` has the shape of the project's hot rows: a uuid key, a unique
-- business key, a time index, about 400 bytes. `walt` is wide rows and no index: WAL alone.
DROP TABLE IF EXISTS rowt, walt;
CREATE TABLE rowt (
  id uuid PRIMARY KEY,
  brand bigint NOT NULL,
  k bigint NOT NULL,
  user_id text NOT NULL,
  payload json NOT NULL,
  status text NOT NULL DEFAULT 'accepted',
  attempts int NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (brand, k)
);
CREATE INDEX ON rowt (created_at);
CREATE TABLE walt (n bigint, pad text);
