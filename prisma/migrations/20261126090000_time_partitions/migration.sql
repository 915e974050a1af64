-- Written by hand (partitioned tables, see "Changing the database schema" in README.md).

-- Messages, deliveries and events are partitioned by day (UTC), so that retention drops a whole
-- day at once instead of deleting every row again. The apps create each day's partition ahead of
-- time (libs/db/src/partitions.ts): a migration cannot, it does not know the day it runs on.
-- The tables as they were become each one's DEFAULT partition: it holds the rows written before
-- this migration, and any row of a day whose partition is missing, so an insert never fails for
-- want of a partition. Retention purges the default partitions row by row, as before.
--
-- The partition key:
-- - messages: accepted_on, the UTC day of the push id (a UUIDv7, made by the gateway when it
--   accepts the push). Whoever holds a push id knows its partition, so every lookup by push id
--   reads one partition. A push accepted before ids were UUIDv7 has the day 1970-01-01: no day
--   partition is ever made for it, so such rows stay in the default partition, where a lookup by
--   their id finds them.
-- - deliveries: accepted_on, their message's.
-- - events: occurred_at.
-- A primary or unique key of a partitioned table includes its partition key: (id, accepted_on) and
-- (id, occurred_at), and a push's key (brand_id, crm_message_id) is unique within its day. The
-- gateway finds a retried push in the days before (PUSH_DEDUPE_DAYS, see libs/db/src/messages.ts).
-- Deliveries lose their foreign key to messages (a key to a partitioned table would have to name
-- the partition key too): they are written with their message, in one statement, and go with
-- their message's day.

-- The UTC day of a UUIDv7's timestamp (its first 48 bits, milliseconds), 1970-01-01 for an id of
-- another version (its 15th character, the version, is not 7). The same as uuidV7Day() in
-- libs/db/src/partitions.ts. Not STRICT, so that PostgreSQL inlines it into the statements that
-- call it (a call of an SQL function that is not inlined costs several microseconds).
CREATE FUNCTION "uuid_v7_day"("id" UUID) RETURNS DATE LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN substr("id"::TEXT, 15, 1) = '7'
              THEN DATE '1970-01-01' + ((('x' || substr("id"::TEXT, 1, 8) || substr("id"::TEXT, 10, 4))::BIT(48)::BIGINT) / 86400000)::INTEGER
              ELSE DATE '1970-01-01'
         END
$$;

-- The view over events is made anew below, on the partitioned table.
DROP VIEW "event_dispatch";
ALTER TABLE "deliveries" DROP CONSTRAINT "deliveries_message_id_fkey";

-- messages
ALTER TABLE "messages" RENAME TO "messages_default";
ALTER TABLE "messages_default" ADD COLUMN "accepted_on" DATE;
UPDATE "messages_default" SET "accepted_on" = "uuid_v7_day"("id");
ALTER TABLE "messages_default" ALTER COLUMN "accepted_on" SET NOT NULL;
ALTER TABLE "messages_default" DROP CONSTRAINT "messages_pkey";
ALTER TABLE "messages_default" ADD CONSTRAINT "messages_default_pkey" PRIMARY KEY ("id", "accepted_on");
DROP INDEX "messages_brand_id_crm_message_id_key";
CREATE UNIQUE INDEX "messages_default_brand_id_crm_message_id_accepted_on_key" ON "messages_default"("brand_id", "crm_message_id", "accepted_on");
DROP INDEX "messages_created_at_idx";
-- Retention purges the default partition by rows, oldest first.
CREATE INDEX "messages_default_created_at_idx" ON "messages_default"("created_at");

CREATE TABLE "messages" (LIKE "messages_default" INCLUDING DEFAULTS) PARTITION BY RANGE ("accepted_on");
ALTER TABLE "messages" ADD CONSTRAINT "messages_pkey" PRIMARY KEY ("id", "accepted_on");
CREATE UNIQUE INDEX "messages_brand_id_crm_message_id_accepted_on_key" ON "messages"("brand_id", "crm_message_id", "accepted_on");
ALTER TABLE "messages" ATTACH PARTITION "messages_default" DEFAULT;

-- deliveries
ALTER TABLE "deliveries" RENAME TO "deliveries_default";
ALTER TABLE "deliveries_default" ADD COLUMN "accepted_on" DATE;
UPDATE "deliveries_default" d SET "accepted_on" = m."accepted_on" FROM "messages_default" m WHERE m."id" = d."message_id";
DELETE FROM "deliveries_default" WHERE "accepted_on" IS NULL;
ALTER TABLE "deliveries_default" ALTER COLUMN "accepted_on" SET NOT NULL;
ALTER TABLE "deliveries_default" DROP CONSTRAINT "deliveries_pkey";
ALTER TABLE "deliveries_default" ADD CONSTRAINT "deliveries_default_pkey" PRIMARY KEY ("id", "accepted_on");
DROP INDEX "deliveries_message_id_device_id_key";
CREATE UNIQUE INDEX "deliveries_default_message_id_device_id_accepted_on_key" ON "deliveries_default"("message_id", "device_id", "accepted_on");
ALTER INDEX "deliveries_open_provider_updated_at_idx" RENAME TO "deliveries_default_open_provider_updated_at_idx";

CREATE TABLE "deliveries" (LIKE "deliveries_default" INCLUDING DEFAULTS) PARTITION BY RANGE ("accepted_on");
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_pkey" PRIMARY KEY ("id", "accepted_on");
CREATE UNIQUE INDEX "deliveries_message_id_device_id_accepted_on_key" ON "deliveries"("message_id", "device_id", "accepted_on");
CREATE INDEX "deliveries_open_provider_updated_at_idx" ON "deliveries"("provider", "updated_at") WHERE "open";
ALTER TABLE "deliveries" ATTACH PARTITION "deliveries_default" DEFAULT;

-- events
ALTER TABLE "events" RENAME TO "events_default";
ALTER TABLE "events_default" DROP CONSTRAINT "events_pkey";
ALTER TABLE "events_default" ADD CONSTRAINT "events_default_pkey" PRIMARY KEY ("id", "occurred_at");
ALTER INDEX "events_ordering_key_seq_idx" RENAME TO "events_default_ordering_key_seq_idx";
ALTER INDEX "events_topic_feed_seq_idx" RENAME TO "events_default_topic_feed_seq_idx";
ALTER INDEX "events_occurred_at_idx" RENAME TO "events_default_occurred_at_idx";

CREATE TABLE "events" (LIKE "events_default" INCLUDING DEFAULTS) PARTITION BY RANGE ("occurred_at");
ALTER SEQUENCE "events_seq_seq" OWNED BY "events"."seq";
ALTER TABLE "events" ADD CONSTRAINT "events_pkey" PRIMARY KEY ("id", "occurred_at");
CREATE INDEX "events_ordering_key_seq_idx" ON "events"("ordering_key", "seq");
CREATE INDEX "events_topic_feed_seq_idx" ON "events"("topic", "feed_seq");
ALTER TABLE "events" ATTACH PARTITION "events_default" DEFAULT;

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
