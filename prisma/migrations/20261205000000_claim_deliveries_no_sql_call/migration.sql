-- claim_deliveries, answering the same rows, without calling push_deliveries(). Given the pushes'
-- ids as a sub-select, that SQL function could not be inlined: PostgreSQL ran it as a function and
-- planned its body at every call, over every day partition of messages and deliveries (about 3 ms
-- a claim, whatever the job's size). A push of several devices now takes its deliveries from the
-- row the claim read, each looked up by key in its day's partition, in the plan this function keeps
-- per connection.
-- The body is a string whose one semicolon is written \073: the migration runner splits a script
-- at every semicolon, quoted or not.
CREATE OR REPLACE FUNCTION "claim_deliveries"("push_ids" UUID[], "prov" TEXT, "days" DATE[])
RETURNS TABLE ("kind" TEXT, "id" UUID, "message_id" UUID, "device_id" UUID, "token" TEXT, "platform" TEXT, "p256dh" TEXT,
               "auth" TEXT, "device_active" BOOLEAN, "attempts" INTEGER, "brand_id" TEXT, "payload" JSON)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS E'
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH pushes AS MATERIALIZED (
         SELECT m.* FROM unnest("push_ids") AS w(id) CROSS JOIN LATERAL (
           SELECT m.id, m.brand_id, m.payload, m.open, m.attempts, m.delivery_ids, m.device_ids, m.providers
             FROM messages m WHERE m.id = w.id AND m.accepted_on = uuid_v7_day(w.id) OFFSET 0) m),
       claimed AS MATERIALIZED (
         SELECT m.delivery_ids[1] AS id, m.id AS message_id, m.device_ids[1] AS device_id, COALESCE(m.attempts, 0) AS attempts
           FROM pushes m WHERE cardinality(m.delivery_ids) = 1 AND m.open AND m.providers[1] = "prov"
         UNION ALL
         SELECT u.id, m.id, u.device_id, COALESCE(d.attempts, 0)
           FROM pushes m
          CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) AS u(id, device_id, provider)
           LEFT JOIN LATERAL (
             SELECT d.status, d.attempts FROM deliveries d
              WHERE d.id = u.id AND d.accepted_on = uuid_v7_day(m.id) AND d.accepted_on = ANY("days") OFFSET 0) d ON true
          WHERE cardinality(m.delivery_ids) > 1 AND u.provider = "prov" AND COALESCE(d.status::text, ''pending'') = ''pending'')
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
