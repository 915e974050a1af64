-- events_feed_positions(n): reserves the next n positions of the current transaction in the feed
-- and answers the first, as n calls of events_feed_position() would answer them one by one. A
-- statement that inserts many events takes their positions in one call: the default's settings
-- cost about 4 microseconds a row. Inserts that keep the default go on after the reserved
-- positions, in the same transaction.
CREATE FUNCTION "events_feed_positions"("n" BIGINT) RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT COALESCE(NULLIF(current_setting('operator.events_feed_base', true), '')::BIGINT,
                  set_config('operator.events_feed_base', "events_feed_base"(pg_current_xact_id()::TEXT::BIGINT)::TEXT, true)::BIGINT)
         + CASE WHEN first + "n" <= 65536 THEN first ELSE ('more than 65536 events in one transaction: ' || (first + "n"))::BIGINT END
    FROM (SELECT set_config('operator.events_feed_position',
                            (COALESCE(NULLIF(current_setting('operator.events_feed_position', true), ''), '0')::BIGINT + "n")::TEXT,
                            true)::BIGINT - "n" AS first) AS next
$$;
