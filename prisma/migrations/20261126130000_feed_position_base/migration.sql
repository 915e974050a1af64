-- Written by hand (a function, see "Changing the database schema" in docs/developing.md). No
-- semicolon may appear in a comment here: the migration runner splits the script at each one.

-- events_feed_position() worked out the base of the feed positions (the transaction id and the WAL
-- timeline, see feed_timelines) again for every event. A transaction has one base: it is now worked
-- out at its first event and kept in a setting local to the transaction, as the count of its events
-- already is. Positions are the same as before.
CREATE OR REPLACE FUNCTION "events_feed_position"() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT COALESCE(NULLIF(current_setting('operator.events_feed_base', true), '')::BIGINT,
                  set_config('operator.events_feed_base', "events_feed_base"(pg_current_xact_id()::TEXT::BIGINT)::TEXT, true)::BIGINT)
         + CASE WHEN n < 65536 THEN n ELSE ('more than 65536 events in one transaction: ' || n)::BIGINT END
    FROM (SELECT set_config('operator.events_feed_position',
                            (COALESCE(NULLIF(current_setting('operator.events_feed_position', true), ''), '0')::BIGINT + 1)::TEXT,
                            true)::BIGINT - 1 AS n) AS next
$$;
