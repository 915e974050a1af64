-- Written by hand (functions, see "Changing the database schema" in README.md).

-- The polling feed's positions across a failover. A standby promoted after asynchronous
-- replication starts its transaction ids where its replay ended: below the ids of the old
-- primary's last transactions, which it never received. A poller that had read one of those lost
-- events holds a cursor above the new primary's next positions, and would skip every event it
-- writes until its ids catch up. Each promotion starts a new timeline, so the timeline moves the
-- position space up by 2^32 transaction ids, far more than any replica lags: every position on a
-- new timeline is above every position handed out on the timelines before it. Positions written
-- before this migration have no timeline part and stay below all new ones.
-- (Bounds: (xid + timeline * 2^32) * 65536 fits a BIGINT up to timeline 32 000 with 2^40 ids.)

-- The timeline this server writes on. A standby (where the feed may be read, never written)
-- answers the timeline of its last restartpoint, never ahead of what it replays.
CREATE FUNCTION "events_feed_timeline"() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::BIGINT
              ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::BIT(32)::BIGINT END
$$;

-- A transaction's first position: the feed's positions of a transaction id on this timeline.
CREATE FUNCTION "events_feed_base"("xid" BIGINT) RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT ("xid" + "events_feed_timeline"() * 4294967296) * 65536
$$;

CREATE OR REPLACE FUNCTION "events_feed_position"() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT "events_feed_base"(pg_current_xact_id()::TEXT::BIGINT) + CASE WHEN n < 65536 THEN n ELSE ('more than 65536 events in one transaction: ' || n)::BIGINT END
    FROM (SELECT set_config('operator.events_feed_position',
                            (COALESCE(NULLIF(current_setting('operator.events_feed_position', true), ''), '0')::BIGINT + 1)::TEXT,
                            true)::BIGINT - 1 AS n) AS next
$$;
