-- accept_messages: what storeMessages (libs/db/src/messages.ts) runs to accept messages, in one
-- statement: finds the keys already accepted from "first_day" to "last_day" and the players' active
-- devices, and inserts, in key order (no deadlock), the messages of reachable players, each naming one
-- delivery per device. One row per message given, in its order ("n"), with the push id of its key
-- accepted before, whether it was inserted now, whether its player is reachable, and its providers.
--
-- A PL/pgSQL function so that its plan is made once per connection, not at every call: planning
-- this statement over the partitions of messages costs more than running it for a few messages, as
-- a group of singles is. The plan is generic (the days prune the partitions when it starts), which
-- is why plan_cache_mode is set. It runs in the caller's transaction and isolation, and nothing of it
-- outlives the transaction, so PgBouncer in transaction mode may move the next call elsewhere.
-- The body is a string whose one semicolon is written \073: the migration runner splits a script
-- at every semicolon, quoted or not.
CREATE FUNCTION "accept_messages"("input_json" JSON, "first_day" DATE, "last_day" DATE)
RETURNS TABLE ("n" BIGINT, "known_id" UUID, "inserted" BOOLEAN, "reachable" BOOLEAN, "providers" TEXT[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS E'
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
         SELECT * FROM ROWS FROM (json_to_recordset("input_json") AS (
                         id uuid, accepted_on date, brand_id bigint, crm_message_id bigint, user_id text, activity_id bigint, action_group_id bigint,
                         action_id bigint, trigger_hash text, origin text, payload json, meta text, crm_headers jsonb))
                  WITH ORDINALITY AS i(id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id,
                                       trigger_hash, origin, payload, meta, crm_headers, n)),
       -- Per message: the push id of its key if accepted before, and its player''s active devices.
       -- Each is a lookup through its index (OFFSET 0 and the aggregate keep them lookups whatever
       -- the statistics, which lag far behind a burst), and nothing below joins two sets: the
       -- planner takes an INSERT ... RETURNING for one row, and a join it plans from that can go
       -- quadratic on a batch.
       targets AS MATERIALIZED (
         SELECT i.*, k.id AS known_id, v.device_ids, v.providers
           FROM input i
           LEFT JOIN LATERAL (
             SELECT m.id FROM messages m
              WHERE m.brand_id = i.brand_id AND m.crm_message_id = i.crm_message_id AND m.accepted_on BETWEEN "first_day" AND "last_day"
             OFFSET 0) k ON true
           LEFT JOIN LATERAL (
             SELECT array_agg(d.id ORDER BY d.id) AS device_ids, array_agg(d.provider::text ORDER BY d.id) AS providers
               FROM devices d WHERE d.user_id = i.user_id AND d.brand_id = i.brand_id AND d.active) v ON true),
       inserted AS (
         INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id,
                               trigger_hash, origin, payload, meta, crm_headers, delivery_ids, device_ids, providers)
         SELECT t.id, t.accepted_on, t.brand_id, t.crm_message_id, t.user_id, t.activity_id, t.action_group_id, t.action_id,
                t.trigger_hash, t.origin, t.payload, t.meta::json, t.crm_headers,
                ARRAY(SELECT uuid_v7() FROM unnest(t.device_ids)), t.device_ids, t.providers::text[]
           FROM targets t
          WHERE t.known_id IS NULL AND t.device_ids IS NOT NULL
          ORDER BY t.brand_id, t.crm_message_id
         ON CONFLICT (brand_id, crm_message_id, accepted_on) DO NOTHING
         RETURNING id)
       SELECT t.n, t.known_id, t.id = ANY(ARRAY(SELECT id FROM inserted)), t.device_ids IS NOT NULL, t.providers
         FROM targets t
        ORDER BY t.n\073
END
';
