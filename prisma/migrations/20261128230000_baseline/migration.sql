-- The schema of release 1.0.0, written by hand: partitioned tables, partial and GIN indexes,
-- storage parameters, functions and a view are beyond Prisma's schema language.
-- No semicolon may appear in a comment or a function body here: Prisma's driver adapter cuts the
-- script at each one (functions are plain SQL, not PL/pgSQL).

CREATE SCHEMA IF NOT EXISTS "public";

-- Types

CREATE TYPE "Platform" AS ENUM ('android', 'ios', 'web');
CREATE TYPE "MessageStatus" AS ENUM ('accepted', 'sent', 'failed', 'delivered', 'opened', 'clicked');
CREATE TYPE "DeliveryStatus" AS ENUM ('pending', 'sent', 'failed');
CREATE TYPE "DispatchState" AS ENUM ('pending', 'delivered', 'dead');
CREATE TYPE "CreditKind" AS ENUM ('bonus', 'funds');
CREATE TYPE "CreditStatus" AS ENUM ('accepted', 'completed', 'failed');

-- Ids

-- A UUIDv7 made in the database, for rows a statement creates itself: a random v4 id whose first
-- 48 bits are replaced by the Unix time in milliseconds, its version nibble turned from 4 into 7
-- (bits 52 and 53 set), so new rows land at the right edge of the primary key's index.
CREATE FUNCTION "uuid_v7"() RETURNS UUID LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                                        PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::BIGINT) FROM 3)
                                        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::UUID
$$;

-- The UTC day of a UUIDv7's timestamp, 1970-01-01 for an id of another version: the partition of
-- a push id (uuidV7Day() in libs/db/src/partitions.ts). Not STRICT, so that it is inlined.
CREATE FUNCTION "uuid_v7_day"("id" UUID) RETURNS DATE LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN substr("id"::TEXT, 15, 1) = '7'
              THEN DATE '1970-01-01' + ((('x' || substr("id"::TEXT, 1, 8) || substr("id"::TEXT, 10, 4))::BIT(48)::BIGINT) / 86400000)::INTEGER
              ELSE DATE '1970-01-01'
         END
$$;

-- devices: a player's device, registered by the operator's back end.

CREATE TABLE "devices" (
    "id" UUID NOT NULL,
    "brand_id" BIGINT NOT NULL,
    "user_id" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "platform" "Platform",
    "token" TEXT NOT NULL,
    "p256dh" TEXT,
    "auth" TEXT,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "deactivated_at" TIMESTAMPTZ(3),
    "deactivated_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "devices_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "devices_provider_token_key" ON "devices"("provider", "token");
-- A player's devices in one brand (the gateway) or in all of them (GET /v1/players/:user_id/devices).
CREATE INDEX "devices_user_id_brand_id_idx" ON "devices"("user_id", "brand_id");

-- messages, deliveries and events are partitioned by UTC day, so that retention drops a day whole.
-- The apps make each day's partition ahead of time (libs/db/src/partitions.ts). Each table's
-- DEFAULT partition takes a row of a day that has none, so an insert never fails, and retention
-- purges it row by row. A primary or unique key of a partitioned table includes its partition key.

-- messages: one push accepted from the CRM, partitioned by accepted_on, the day of its id.

-- What a push is told at acceptance first, what its settlement changes last: the update's WAL
-- leaves out the new row's bytes it shares with the old one from the start (and end), so the
-- payload is not logged again. Fixed-width columns lead each part: no alignment padding.
CREATE TABLE "messages" (
    "id" UUID NOT NULL,
    "brand_id" BIGINT NOT NULL,
    "crm_message_id" BIGINT NOT NULL,
    "activity_id" BIGINT NOT NULL,
    "action_group_id" BIGINT NOT NULL,
    "action_id" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "accepted_on" DATE NOT NULL,
    "user_id" TEXT NOT NULL,
    "trigger_hash" TEXT NOT NULL,
    "origin" TEXT,
    "payload" JSON NOT NULL,
    "meta" JSON,
    "crm_headers" JSONB NOT NULL,
    "delivery_ids" UUID[],
    "device_ids" UUID[],
    "providers" TEXT[],
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMPTZ(3),
    "status" "MessageStatus" NOT NULL DEFAULT 'accepted',
    "attempts" INTEGER,
    "open" BOOLEAN DEFAULT true,
    "error" TEXT,
    "error_code" TEXT,
    "error_detail" TEXT,
    "provider_message_id" TEXT,

    CONSTRAINT "messages_pkey" PRIMARY KEY ("id", "accepted_on")
) PARTITION BY RANGE ("accepted_on");
-- A retried push is found by its activity id in its day and the days before (PUSH_DEDUPE_DAYS).
CREATE UNIQUE INDEX "messages_brand_id_crm_message_id_accepted_on_key" ON "messages"("brand_id", "crm_message_id", "accepted_on");
-- The open pushes, by when they last moved, for the reconciler.
CREATE INDEX "messages_open_updated_at_idx" ON "messages"("updated_at") WHERE "open";

-- Half of each page free, so that the updates of the send path stay HOT (as each day's partition).
CREATE TABLE "messages_default" PARTITION OF "messages" DEFAULT WITH (fillfactor = 50);
ALTER INDEX "messages_default_brand_id_crm_message_id_accepted_on_idx" RENAME TO "messages_default_brand_id_crm_message_id_accepted_on_key";
-- Retention's purge of the default partition, oldest first.
CREATE INDEX "messages_default_created_at_idx" ON "messages_default"("created_at");

-- deliveries: the send of a message to one device, partitioned with its message. No foreign keys:
-- one to messages would have to name the partition key, and one to devices would lock the
-- device's row at every insert (a removed device is one the send does not find).

CREATE TABLE "deliveries" (
    "id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "device_id" UUID,
    "provider" TEXT NOT NULL,
    "status" "DeliveryStatus" NOT NULL DEFAULT 'pending',
    "provider_message_id" TEXT,
    "error_code" TEXT,
    "error" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "sent_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "open" BOOLEAN DEFAULT true,
    "accepted_on" DATE NOT NULL,

    CONSTRAINT "deliveries_pkey" PRIMARY KEY ("id", "accepted_on")
) PARTITION BY RANGE ("accepted_on");
CREATE UNIQUE INDEX "deliveries_message_id_device_id_accepted_on_key" ON "deliveries"("message_id", "device_id", "accepted_on");
-- The open deliveries, for the reconciler: it reads `open`, not status, which changes once, so
-- the updates before the last one stay HOT.
CREATE INDEX "deliveries_open_provider_updated_at_idx" ON "deliveries"("provider", "updated_at") WHERE "open";

CREATE TABLE "deliveries_default" PARTITION OF "deliveries" DEFAULT WITH (fillfactor = 50);
ALTER INDEX "deliveries_default_message_id_device_id_accepted_on_idx" RENAME TO "deliveries_default_message_id_device_id_accepted_on_key";
ALTER INDEX "deliveries_default_provider_updated_at_idx" RENAME TO "deliveries_default_open_provider_updated_at_idx";

-- Every delivery of the given pushes as it stands, one row each, whatever holds its outcome: the
-- push itself for a push of one device, else the delivery's row once a try of it has an outcome
-- (pending with no try before that). Every statement that needs a delivery's state reads it here.
-- A SQL function of one SELECT, not strict and not volatile, so PostgreSQL inlines it into the
-- calling statement: `days` (the pushes' accepted_on) prunes the partitions of both tables, and
-- each push and row is a lookup by key (OFFSET 0 keeps the planner from turning them into a join
-- or, with statistics that lag behind a burst, into a scan of the day's partition).
-- `updated_at` is when the delivery last moved: its row's, else its push's.
CREATE FUNCTION "push_deliveries"("push_ids" UUID[], "days" DATE[])
RETURNS TABLE ("id" UUID, "message_id" UUID, "accepted_on" DATE, "device_id" UUID, "provider" TEXT, "status" TEXT,
               "attempts" INTEGER, "provider_message_id" TEXT, "error_code" TEXT, "error" TEXT, "sent_at" TIMESTAMPTZ(3),
               "updated_at" TIMESTAMPTZ(3))
LANGUAGE sql STABLE AS $$
  SELECT u.id, m.id, m.accepted_on, u.device_id, u.provider,
         CASE WHEN m.n = 1 THEN (CASE WHEN m.open THEN 'pending' WHEN m.sent_at IS NULL THEN 'failed' ELSE 'sent' END)
              ELSE COALESCE(d.status::text, 'pending') END,
         CASE WHEN m.n = 1 THEN COALESCE(m.attempts, 0) ELSE COALESCE(d.attempts, 0) END,
         CASE WHEN m.n = 1 THEN m.provider_message_id ELSE d.provider_message_id END,
         CASE WHEN m.n = 1 THEN m.error_code ELSE d.error_code END,
         CASE WHEN m.n = 1 THEN m.error_detail ELSE d.error END,
         CASE WHEN m.n = 1 THEN m.sent_at ELSE d.sent_at END,
         COALESCE(d.updated_at, m.updated_at)
    FROM (SELECT DISTINCT p.id FROM unnest("push_ids") AS p(id)) p
   CROSS JOIN LATERAL (
      SELECT m.id, m.accepted_on, m.delivery_ids, m.device_ids, m.providers, cardinality(m.delivery_ids) AS n, m.open, m.attempts,
             m.provider_message_id, m.error_code, m.error_detail, m.sent_at, m.updated_at
        FROM messages m WHERE m.id = p.id AND m.accepted_on = ANY("days") OFFSET 0) m
   CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) AS u(id, device_id, provider)
    LEFT JOIN LATERAL (
      SELECT d.status, d.attempts, d.provider_message_id, d.error_code, d.error, d.sent_at, d.updated_at FROM deliveries d
       WHERE m.n > 1 AND d.id = u.id AND d.accepted_on = m.accepted_on AND d.accepted_on = ANY("days") OFFSET 0) d ON true
$$;

-- send_leases: a send job's claim on the pushes it sends to one provider, one row a job, left to
-- lapse by a worker that dies (takeSendLease in libs/db/src/deliveries.ts).

CREATE TABLE "send_leases" (
    "id" UUID NOT NULL,
    "provider" TEXT NOT NULL,
    "push_ids" UUID[] NOT NULL,
    "taken_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
    "lease_until" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "send_leases_pkey" PRIMARY KEY ("id")
);
-- fastupdate off: a lease is looked up far more often than written, and a pending list would be
-- read whole at every lookup.
CREATE INDEX "send_leases_push_ids_idx" ON "send_leases" USING GIN ("push_ids") WITH (fastupdate = off);

-- The lookups of send_leases by push, forced onto the GIN index: the table holds many dead rows
-- between vacuums, and with stale statistics the planner scans them all. A function's SET holds
-- for its own statement only, so it works behind PgBouncer in transaction mode too.

-- The pushes among `wanted` that another live lease of `prov` names (one lapsed less than
-- `grace_ms` ago still counts).
CREATE FUNCTION "send_lease_conflicts"("lease" UUID, "wanted" UUID[], "prov" TEXT, "grace_ms" DOUBLE PRECISION) RETURNS UUID[]
LANGUAGE sql VOLATILE SET enable_seqscan = off AS $$
  SELECT COALESCE(array_agg(DISTINCT h.id), '{}')
    FROM send_leases l CROSS JOIN LATERAL unnest(l.push_ids) AS h(id)
   WHERE l.push_ids && "wanted" AND l.provider = "prov" AND l.id <> "lease"
     AND l.lease_until > clock_timestamp() - "grace_ms" * interval '1 millisecond' AND h.id = ANY("wanted")
$$;

-- Whether a live lease of `prov` names push `push`.
CREATE FUNCTION "send_lease_live"("push" UUID, "prov" TEXT) RETURNS BOOLEAN
LANGUAGE sql STABLE SET enable_seqscan = off AS $$
  SELECT EXISTS (SELECT 1 FROM send_leases l WHERE l.push_ids @> ARRAY["push"] AND l.provider = "prov" AND l.lease_until > now())
$$;

-- events: the transactional outbox, written once, in the transaction of the change it reports.

-- The feed's positions. An event's position is its transaction's base plus its place among that
-- transaction's events (at most 65536). The base is the transaction id moved up by 2^32 per WAL
-- timeline, times 65536: a standby promoted after asynchronous replication reuses ids of the old
-- primary's lost transactions, but on a new timeline, so its positions are above every earlier one.
-- Readers read only below their snapshot's xmin, so no event can later appear behind a cursor.

-- The timeline this server writes on (on a standby, that of its last restartpoint).
CREATE FUNCTION "events_feed_timeline"() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::BIGINT
              ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::BIT(32)::BIGINT END
$$;

-- The first position of transaction `xid` on this timeline.
CREATE FUNCTION "events_feed_base"("xid" BIGINT) RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT ("xid" + "events_feed_timeline"() * 4294967296) * 65536
$$;

-- The next position of the current transaction: its base and its count of events are kept in
-- settings local to the transaction.
CREATE FUNCTION "events_feed_position"() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT COALESCE(NULLIF(current_setting('operator.events_feed_base', true), '')::BIGINT,
                  set_config('operator.events_feed_base', "events_feed_base"(pg_current_xact_id()::TEXT::BIGINT)::TEXT, true)::BIGINT)
         + CASE WHEN n < 65536 THEN n ELSE ('more than 65536 events in one transaction: ' || n)::BIGINT END
    FROM (SELECT set_config('operator.events_feed_position',
                            (COALESCE(NULLIF(current_setting('operator.events_feed_position', true), ''), '0')::BIGINT + 1)::TEXT,
                            true)::BIGINT - 1 AS n) AS next
$$;

-- Written once: fixed-width columns first, so no alignment padding between them.
CREATE TABLE "events" (
    "id" UUID NOT NULL,
    "seq" BIGSERIAL NOT NULL,
    "feed_seq" BIGINT NOT NULL DEFAULT "events_feed_position"(),
    "occurred_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "push_id" UUID,
    "topic" TEXT NOT NULL,
    "ordering_key" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "error" TEXT,
    "body" JSON,

    CONSTRAINT "events_pkey" PRIMARY KEY ("id", "occurred_at")
) PARTITION BY RANGE ("occurred_at");
-- The events of a key, in order.
CREATE INDEX "events_ordering_key_seq_idx" ON "events"("ordering_key", "seq");
-- A topic's events in feed order, for the dispatchers' ranges and the polling feed.
CREATE INDEX "events_topic_feed_seq_idx" ON "events"("topic", "feed_seq");

CREATE TABLE "events_default" PARTITION OF "events" DEFAULT;
-- Retention's purge of the default partition, oldest first.
CREATE INDEX "events_default_occurred_at_idx" ON "events_default"("occurred_at");

-- Dispatch of events to the CRM. Each topic has a cursor up to which its events were handed to a
-- range. Only the ranges being posted are rows, and only events that did not go through at once
-- have rows of their own (retries, held behind an earlier event of their key, dead letters).

CREATE TABLE "dispatch_cursors" (
    "topic" TEXT NOT NULL,
    "position" BIGINT NOT NULL,

    CONSTRAINT "dispatch_cursors_pkey" PRIMARY KEY ("topic")
);

-- The topic's events with after_position < feed_seq <= through_position, leased while posted.
CREATE TABLE "dispatch_ranges" (
    "id" UUID NOT NULL,
    "topic" TEXT NOT NULL,
    "after_position" BIGINT NOT NULL,
    "through_position" BIGINT NOT NULL,
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
    -- Past this an undelivered event is a dead letter (null: occurred_at + WEBHOOK_MAX_AGE).
    "expires_at" TIMESTAMPTZ(3),
    "last_error" TEXT,

    CONSTRAINT "dispatch_retries_pkey" PRIMARY KEY ("event_id")
);
-- Only pending or dead retries, so the claim costs the same however many were delivered.
CREATE INDEX "dispatch_retries_pending_topic_seq_idx" ON "dispatch_retries"("topic", "seq") WHERE "state" = 'pending';
CREATE INDEX "dispatch_retries_pending_key_seq_idx" ON "dispatch_retries"("ordering_key", "seq") WHERE "state" = 'pending';
CREATE INDEX "dispatch_retries_dead_seq_idx" ON "dispatch_retries"("seq") WHERE "state" = 'dead';

-- What became of each event, for people and tests: retries and dead letters from
-- dispatch_retries, the rest from the topic's settled position.
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

-- Bonuses: the catalog, the credits the CRM asked for, the bonuses players hold, and the ledger.

CREATE TABLE "bonuses" (
    "code" TEXT NOT NULL,
    "label" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "product" TEXT NOT NULL,
    "amount_minor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "validity_days" INTEGER NOT NULL,
    "wagering_requirement" DECIMAL(10,2) NOT NULL,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "bonuses_pkey" PRIMARY KEY ("code")
);

CREATE TABLE "credits" (
    "id" UUID NOT NULL,
    "idempotency_key" TEXT NOT NULL,
    "tuple_key" TEXT,
    "kind" "CreditKind" NOT NULL,
    "user_id" TEXT NOT NULL,
    "bonus_code" TEXT,
    "amount_minor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "request" JSON NOT NULL,
    "crm_headers" JSONB NOT NULL,
    "status" "CreditStatus" NOT NULL DEFAULT 'accepted',
    "error" TEXT,
    "reference" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "locked_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "fingerprint" TEXT NOT NULL,
    "lease_owner" UUID,

    CONSTRAINT "credits_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "credits_idempotency_key_key" ON "credits"("idempotency_key");
-- tuple_key is the SHA-256 (hex) of the tuple's JSON, so this index holds 64 bytes a key.
CREATE UNIQUE INDEX "credits_tuple_key_key" ON "credits"("tuple_key");
CREATE INDEX "credits_status_next_attempt_at_idx" ON "credits"("status", "next_attempt_at");
CREATE INDEX "credits_user_id_idx" ON "credits"("user_id");

CREATE TABLE "player_bonuses" (
    "id" UUID NOT NULL,
    "credit_id" UUID NOT NULL,
    "user_id" TEXT NOT NULL,
    "bonus_code" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "product" TEXT NOT NULL,
    "amount_minor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "required_wagering_minor" BIGINT NOT NULL,
    "status" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "player_bonuses_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "player_bonuses_credit_id_key" ON "player_bonuses"("credit_id");
CREATE INDEX "player_bonuses_user_id_idx" ON "player_bonuses"("user_id");
CREATE INDEX "player_bonuses_status_expires_at_idx" ON "player_bonuses"("status", "expires_at");

-- A balance adds up credits without end (the house's side of every one): numeric(38,0), which
-- cannot overflow where bigint would.
CREATE TABLE "accounts" (
    "id" UUID NOT NULL,
    "owner" TEXT NOT NULL,
    "currency" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "balance_minor" DECIMAL(38,0) NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "accounts_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "accounts_owner_currency_kind_key" ON "accounts"("owner", "currency", "kind");

CREATE TABLE "ledger_entries" (
    "id" UUID NOT NULL,
    "transaction_id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "amount_minor" BIGINT NOT NULL,
    "reason" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ledger_entries_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "ledger_entries_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "ledger_entries_transaction_id_account_id_key" ON "ledger_entries"("transaction_id", "account_id");
CREATE INDEX "ledger_entries_account_id_idx" ON "ledger_entries"("account_id");
