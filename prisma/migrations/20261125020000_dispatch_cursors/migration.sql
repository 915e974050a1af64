-- Written by hand (see "Changing the database schema" in README.md).

-- Events are written once. The dispatchers no longer mark each event claimed and then delivered:
-- each topic has a cursor, a position in the feed order (feed_seq) up to which its events have
-- been handed out, and a dispatcher takes the next range of positions with one short write. Only
-- the ranges being posted are rows (dispatch_ranges), and only events that did not go through the
-- first time are rows of their own (dispatch_retries: to retry, held behind an earlier event of
-- their key, or dead letters). An event delivered at the first try costs no write after its insert.
-- A range is read only below the snapshot's xmin, like the polling feed, so no event can later
-- appear behind a cursor.

CREATE TABLE "dispatch_cursors" (
    "topic" TEXT NOT NULL,
    -- Every event of the topic at or below this position has been handed to a range.
    "position" BIGINT NOT NULL,
    CONSTRAINT "dispatch_cursors_pkey" PRIMARY KEY ("topic")
);

CREATE TABLE "dispatch_ranges" (
    "id" UUID NOT NULL,
    "topic" TEXT NOT NULL,
    -- The range is the topic's events with after_position < feed_seq <= through_position.
    "after_position" BIGINT NOT NULL,
    "through_position" BIGINT NOT NULL,
    -- Renewed while its dispatcher posts it. Past it, another dispatcher takes the range again.
    "lease_until" TIMESTAMPTZ(3) NOT NULL,
    CONSTRAINT "dispatch_ranges_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "dispatch_ranges_topic_after_idx" ON "dispatch_ranges"("topic", "after_position");

CREATE TABLE "dispatch_retries" (
    "event_id" UUID NOT NULL,
    "topic" TEXT NOT NULL,
    "ordering_key" TEXT NOT NULL,
    "seq" BIGINT NOT NULL,
    "state" "DispatchState" NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "locked_until" TIMESTAMPTZ(3),
    -- Past this, an undelivered event goes to the dead letters (null: occurred_at + WEBHOOK_MAX_AGE).
    "expires_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    CONSTRAINT "dispatch_retries_pkey" PRIMARY KEY ("event_id")
);
CREATE INDEX "dispatch_retries_pending_topic_seq_idx" ON "dispatch_retries"("topic", "seq") WHERE "state" = 'pending';
CREATE INDEX "dispatch_retries_pending_key_seq_idx" ON "dispatch_retries"("ordering_key", "seq") WHERE "state" = 'pending';
CREATE INDEX "dispatch_retries_dead_seq_idx" ON "dispatch_retries"("seq") WHERE "state" = 'dead';

-- The events still to be posted, and the dead letters, become retries: only those of transactions
-- that have ended (below the xmin horizon, taken once for the whole statement). Each topic's cursor
-- starts just below that horizon, so the events of transactions still running are read by the
-- ranges, and none is taken twice or skipped.
WITH "horizon" AS (SELECT "events_feed_base"(pg_snapshot_xmin(pg_current_snapshot())::TEXT::BIGINT) AS "position"),
"moved" AS (
  INSERT INTO "dispatch_retries" ("event_id", "topic", "ordering_key", "seq", "state", "attempts", "next_attempt_at", "expires_at", "last_error")
  SELECT e."id", e."topic", e."ordering_key", e."seq", e."dispatch_state", e."attempts", e."next_attempt_at", e."expires_at", e."last_error"
    FROM "events" e
   WHERE e."dispatch_state" IN ('pending', 'dead') AND e."feed_seq" < (SELECT "position" FROM "horizon")
  RETURNING 1)
INSERT INTO "dispatch_cursors" ("topic", "position")
SELECT t."topic", (SELECT "position" FROM "horizon") - 1 + 0 * (SELECT count(*) FROM "moved")
  FROM (VALUES ('push.status'), ('bonus'), ('balance')) AS t("topic");

-- The per-event dispatch columns and their indexes go: nothing writes them any more.
DROP INDEX "events_pending_topic_seq_idx";

DROP INDEX "events_dead_seq_idx";
DROP INDEX "events_dispatch_state_occurred_at_idx";
ALTER TABLE "events" DROP COLUMN "dispatch_state",
                     DROP COLUMN "attempts",
                     DROP COLUMN "next_attempt_at",
                     DROP COLUMN "locked_until",
                     DROP COLUMN "expires_at",
                     DROP COLUMN "last_error",
                     DROP COLUMN "delivered_at";

-- A topic's events in feed order: the ranges, and the polling feed, read it. It replaces the
-- unique index on feed_seq alone (positions are unique by construction).
CREATE INDEX "events_topic_feed_seq_idx" ON "events"("topic", "feed_seq");
DROP INDEX "events_feed_seq_key";

-- Nothing looks an event up by seq alone: its order within a key is read through (ordering_key, seq).
DROP INDEX "events_seq_key";

-- Retention's look for events past RETENTION_DAYS, oldest first.
CREATE INDEX "events_occurred_at_idx" ON "events"("occurred_at");

-- What became of each event, for people and tests: dead letters and retries (pending, or delivered
-- after failing first) from dispatch_retries, the rest from the topic's settled position (an event
-- at or below it went through at the first try, above it is still to be posted).
CREATE VIEW "event_dispatch" AS
SELECT e."id", e."topic", e."push_id", e."seq",
       COALESCE(r."state"::TEXT, CASE WHEN e."feed_seq" <= s."position" THEN 'delivered' ELSE 'pending' END) AS "state",
       COALESCE(r."attempts", CASE WHEN e."feed_seq" <= s."position" THEN 1 ELSE 0 END) AS "attempts",
       r."last_error", r."next_attempt_at", r."locked_until"
  FROM "events" e
  LEFT JOIN "dispatch_retries" r ON r."event_id" = e."id"
  CROSS JOIN LATERAL (
    SELECT COALESCE(LEAST((SELECT c."position" FROM "dispatch_cursors" c WHERE c."topic" = e."topic"),
                          (SELECT min(g."after_position") FROM "dispatch_ranges" g WHERE g."topic" = e."topic")), 0) AS "position") s;
