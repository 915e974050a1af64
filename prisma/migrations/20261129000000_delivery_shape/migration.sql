-- Written by hand (a function, see "Changing the database schema" in docs/developing.md). No
-- semicolon may appear in a comment here: the migration runner splits the script at each one.

-- Claims are send leases on pushes, never a mark on a delivery: no claimed_at, no status sending.
ALTER TABLE "deliveries" DROP COLUMN "claimed_at";
ALTER TYPE "DeliveryStatus" RENAME TO "DeliveryStatus_old";
CREATE TYPE "DeliveryStatus" AS ENUM ('pending', 'sent', 'failed');
ALTER TABLE "deliveries" ALTER COLUMN "status" DROP DEFAULT;
ALTER TABLE "deliveries" ALTER COLUMN "status" TYPE "DeliveryStatus"
  USING (CASE WHEN "status"::text = 'sending' THEN 'pending' ELSE "status"::text END)::"DeliveryStatus";
ALTER TABLE "deliveries" ALTER COLUMN "status" SET DEFAULT 'pending';
DROP TYPE "DeliveryStatus_old";

-- Every delivery of the given pushes as it stands, one row each, whatever holds its outcome: the
-- push itself for a push of one device, else the delivery's row once a try of it has an outcome
-- (pending with no try before that). Every statement that needs a delivery's state reads it here.
-- A SQL function of one SELECT, not strict and not volatile, so PostgreSQL inlines it into the
-- calling statement: `days` (the pushes' accepted_on) prunes the partitions of both tables, and
-- each push and row is a lookup by key (OFFSET 0 keeps the planner from turning them into a join
-- or, with statistics that lag behind a burst, into a scan of the day's partition).
-- `updated_at` is when the delivery last moved: its row's, else its push's.
CREATE FUNCTION "push_deliveries"("push_ids" UUID[], "days" DATE[])
RETURNS TABLE ("id" UUID, "message_id" UUID, "accepted_on" DATE, "device_id" UUID, "provider" "Provider", "status" TEXT,
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
