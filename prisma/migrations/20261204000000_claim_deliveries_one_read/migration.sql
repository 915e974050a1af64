-- claim_deliveries, answering the same rows, reading each push once: a push of one device keeps its
-- delivery on its own row (pending while open), so its delivery is taken from the row just read,
-- where push_deliveries() looked the push up a second time and probed every day partition of
-- deliveries for it. Only the pushes of several devices go through push_deliveries().
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
         SELECT x.id, x.message_id, x.device_id, x.attempts
           FROM push_deliveries(ARRAY(SELECT m.id FROM pushes m WHERE cardinality(m.delivery_ids) > 1), "days") x
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
