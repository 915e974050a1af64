-- One transaction: 100 rows inserted in one statement, then updated in one statement (not HOT: the
-- freshly filled pages have no room), as the send path writes a batch and then moves it.
\set brand random(1, 1000000000)
BEGIN;
INSERT INTO rowt (id, brand, k, user_id, payload)
  SELECT gen_random_uuid(), :brand, g, 'player-' || g,
         json_build_object('title', 'Weekend reload', 'body', repeat('x', 250), 'meta', json_build_object('campaign', 'bench', 'n', g))
    FROM generate_series(1, 100) g
  ON CONFLICT DO NOTHING;
UPDATE rowt SET status = 'sent', attempts = attempts + 1 WHERE brand = :brand AND k BETWEEN 1 AND 100;
COMMIT;
