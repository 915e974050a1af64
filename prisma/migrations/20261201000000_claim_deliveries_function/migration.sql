-- claim_deliveries: what claimDeliveries (libs/db/src/claims.ts) reads once its send lease is
-- taken: the provider's pending deliveries of these pushes, with each device and each push's
-- payload (on its first delivery), and a 'missing' row for a push that is not stored.
--
-- A PL/pgSQL function, as accept_messages is, so that its plan is made once per connection: planning
-- this statement over the day partitions of messages and deliveries cost more than running it for a
-- job of 100 pushes. In the generic plan a push's row is found by the day its id names
-- (uuid_v7_day, which accept_messages stores as accepted_on), which prunes the partitions for each
-- push as it runs. A day given as an array parameter would prune none.
--
-- push_deliveries gets the same condition, for the same reason: it keeps the days it is given (a
-- caller's own plan prunes by them) and adds the day of each id. Its rows are unchanged.
-- The bodies are strings whose semicolons are written \073: the migration runner splits a script
-- at every semicolon, quoted or not.
CREATE OR REPLACE FUNCTION "push_deliveries"("push_ids" UUID[], "days" DATE[])
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
        FROM messages m WHERE m.id = p.id AND m.accepted_on = ANY("days") AND m.accepted_on = uuid_v7_day(p.id) OFFSET 0) m
   CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) AS u(id, device_id, provider)
    LEFT JOIN LATERAL (
      SELECT d.status, d.attempts, d.provider_message_id, d.error_code, d.error, d.sent_at, d.updated_at FROM deliveries d
       WHERE m.n > 1 AND d.id = u.id AND d.accepted_on = m.accepted_on AND d.accepted_on = ANY("days") OFFSET 0) d ON true
$$;

CREATE FUNCTION "claim_deliveries"("push_ids" UUID[], "prov" TEXT, "days" DATE[])
RETURNS TABLE ("kind" TEXT, "id" UUID, "message_id" UUID, "device_id" UUID, "token" TEXT, "platform" TEXT, "p256dh" TEXT,
               "auth" TEXT, "device_active" BOOLEAN, "attempts" INTEGER, "brand_id" TEXT, "payload" JSON)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS E'
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH pushes AS MATERIALIZED (
         SELECT m.* FROM unnest("push_ids") AS w(id) CROSS JOIN LATERAL (
           SELECT m.id, m.brand_id, m.payload FROM messages m WHERE m.id = w.id AND m.accepted_on = uuid_v7_day(w.id) OFFSET 0) m),
       claimed AS MATERIALIZED (
         SELECT x.id, x.message_id, x.device_id, x.attempts FROM push_deliveries("push_ids", "days") x
          WHERE x.provider = "prov" AND x.status = ''pending'')
  SELECT ''delivery''::text, c.id, c.message_id, c.device_id, v.token, v.platform::text, v.p256dh, v.auth, COALESCE(v.active, false),
         c.attempts + 1, p.brand_id::text,
         CASE WHEN row_number() OVER (PARTITION BY c.message_id ORDER BY c.id) = 1 THEN p.payload END
    FROM claimed c JOIN pushes p ON p.id = c.message_id
    LEFT JOIN LATERAL (SELECT v.token, v.platform, v.p256dh, v.auth, v.active FROM devices v WHERE v.id = c.device_id OFFSET 0) v ON true
  UNION ALL
  SELECT ''missing''::text, w.id, w.id, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::text, false, NULL::integer, NULL::text, NULL::json
    FROM unnest("push_ids") AS w(id) WHERE NOT EXISTS (SELECT 1 FROM pushes p WHERE p.id = w.id)\073
END
';
