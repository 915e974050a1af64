-- accept_messages, as 20261130000000_accept_messages_function made it, answering the same rows,
-- with two costs taken out:
-- * whether a message was inserted is looked up in the sorted ids of those inserted, by binary
--   search (width_bucket), where the ids' array was read whole for every message: a batch of n cost
--   n * n / 2 comparisons, about a thirtieth of the statement's time at 500 messages and a tenth at
--   2,000.
-- * a message's first delivery takes the id the caller made with the push's (delivery_id), where
--   uuid_v7() made every one: about 5 microseconds each, most of it gen_random_uuid(). A caller that
--   gives none (a gateway of the release before) gets one made here, as before.
-- The body is a string whose one semicolon is written \073: the migration runner splits a script
-- at every semicolon, quoted or not.
CREATE OR REPLACE FUNCTION "accept_messages"("input_json" JSON, "first_day" DATE, "last_day" DATE)
RETURNS TABLE ("n" BIGINT, "known_id" UUID, "inserted" BOOLEAN, "reachable" BOOLEAN, "providers" TEXT[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS E'
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
         SELECT * FROM ROWS FROM (json_to_recordset("input_json") AS (
                         id uuid, delivery_id uuid, accepted_on date, brand_id bigint, crm_message_id bigint, user_id text, activity_id bigint, action_group_id bigint,
                         action_id bigint, trigger_hash text, origin text, payload json, meta text, crm_headers jsonb))
                  WITH ORDINALITY AS i(id, delivery_id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id,
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
                ARRAY(SELECT CASE WHEN d.n = 1 THEN COALESCE(t.delivery_id, uuid_v7()) ELSE uuid_v7() END
                        FROM unnest(t.device_ids) WITH ORDINALITY AS d(id, n) ORDER BY d.n),
                t.device_ids, t.providers::text[]
           FROM targets t
          WHERE t.known_id IS NULL AND t.device_ids IS NOT NULL
          ORDER BY t.brand_id, t.crm_message_id
         ON CONFLICT (brand_id, crm_message_id, accepted_on) DO NOTHING
         RETURNING id),
       -- In id order, for a binary search by width_bucket: whether each message was inserted costs
       -- log n, where = ANY of the array read it whole for every message.
       inserted_ids AS (SELECT array_agg(id ORDER BY id) AS ids FROM inserted)
       SELECT t.n, t.known_id, COALESCE(x.ids[width_bucket(t.id, x.ids)] = t.id, false), t.device_ids IS NOT NULL, t.providers
         FROM targets t CROSS JOIN inserted_ids x
        ORDER BY t.n\073
END
';
