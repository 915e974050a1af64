-- Written by hand: Prisma's schema language cannot express partial indexes, a function, or this
-- backfill (see the Event model in schema.prisma and "Changing the database schema" in README.md).

-- The dispatcher's claim walks a topic's pending events in seq order, and checks for each that no
-- earlier event of its ordering key is still pending. Both indexes hold only pending events, so the
-- claim costs the same with millions of delivered events in the table as with none.
CREATE INDEX "events_pending_topic_seq_idx" ON "events"("topic", "seq") WHERE "dispatch_state" = 'pending';
CREATE INDEX "events_pending_ordering_key_seq_idx" ON "events"("ordering_key", "seq") WHERE "dispatch_state" = 'pending';
-- The dead letters, in order.
CREATE INDEX "events_dead_seq_idx" ON "events"("seq") WHERE "dispatch_state" = 'dead';
-- Served by the partial indexes above: no query looks up events by next_attempt_at alone.
DROP INDEX "events_dispatch_state_next_attempt_at_idx";

-- The polling feed's position of an event, fixed when it is written: its transaction's id times
-- 65536, plus its place among that transaction's events. A reader returns only events of
-- transactions older than its snapshot's xmin (all ended), in this order: an event that is not
-- visible yet belongs to a transaction at or past xmin, so it always lands after the reader's
-- cursor. No sequencer, no lock, no write when the feed is read.
-- (SQL, not PL/pgSQL: Prisma's driver adapter splits a migration at every semicolon.)
CREATE FUNCTION "events_feed_position"() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT pg_current_xact_id()::TEXT::BIGINT * 65536 + CASE WHEN n < 65536 THEN n ELSE ('more than 65536 events in one transaction: ' || n)::BIGINT END
    FROM (SELECT set_config('operator.events_feed_position',
                            (COALESCE(NULLIF(current_setting('operator.events_feed_position', true), ''), '0')::BIGINT + 1)::TEXT,
                            true)::BIGINT - 1 AS n) AS next
$$;

-- Events the old sequencer had not numbered yet, after every number it gave (the numbers already
-- handed out stay, so the cursors pollers hold stay valid: every one is below the first transaction id times 65536).
UPDATE "events" e SET "feed_seq" = f.top + f.n
  FROM (SELECT id, (SELECT COALESCE(max("feed_seq"), 0) FROM "events") AS top, row_number() OVER (ORDER BY seq) AS n
          FROM "events" WHERE "feed_seq" IS NULL) f
 WHERE e.id = f.id;

ALTER TABLE "events" ALTER COLUMN "feed_seq" SET DEFAULT "events_feed_position"(),
                     ALTER COLUMN "feed_seq" SET NOT NULL;
