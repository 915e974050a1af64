import type { ProviderName } from '@operator/contract';
import type { Sql } from './client';
import { addDays, DAY_MS, dayOf, uuidV7Day } from './partitions';

export interface MessageKey {
  brandId: bigint;
  crmMessageId: bigint;
}

export type NewMessage = MessageKey & {
  id: string;
  userId: string;
  activityId: bigint;
  actionGroupId: bigint;
  actionId: bigint;
  triggerHash: string;
  origin: string | null;
  /** The request as sent, unknown fields included. */
  payload: unknown;
  /** `meta` as the exact JSON text the CRM sent (kept byte for byte), or null. */
  meta: string | null;
  crmHeaders: Record<string, string>;
};

export const messageKey = (key: MessageKey) => `${key.brandId}:${key.crmMessageId}`;

// Bulk statements take their rows in one parameter (an array to unnest, or a JSON array of rows):
// a batch of 500 is one statement, whatever its size.

/**
 * How far back a retried push is looked for. A push's key (brand_id, crm_message_id) is unique
 * within its day's partition (the unique index must hold the partition key), and the partitions of
 * the days before are read for it too: from `dedupeDays` days before today (and the default
 * partition, when one of those days has no partition of its own). Each day read costs one index
 * lookup per message.
 */
export interface DedupeWindow {
  dedupeDays: number;
  /** Now, for tests. */
  now?: number;
}

/** The window of PUSH_DEDUPE_DAYS's default: today and the two days before (48 to 72 hours). */
export const DEFAULT_DEDUPE: DedupeWindow = { dedupeDays: 2 };

/**
 * The first and last days whose partitions are read for a retried push: `dedupeDays` before today,
 * through tomorrow (an attempt made just before midnight reads the partition where one made just
 * after it goes, see acceptIsolation).
 */
export function dedupeDays({ dedupeDays: days, now = Date.now() }: DedupeWindow): [string, string] {
  const today = dayOf(now);
  return [addDays(today, -days), addDays(today, 1)];
}

/** push_id of every already accepted message among `keys` (accepted in the window), by messageKey. */
export async function findPushIds(sql: Sql, keys: MessageKey[], window: DedupeWindow = DEFAULT_DEDUPE): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (!keys.length) return found;
  const { rows } = await sql.query<{ id: string; brand_id: string; crm_message_id: string }>(
    `SELECT m.id, m.brand_id::text, m.crm_message_id::text
       FROM messages m
       JOIN unnest($1::bigint[], $2::bigint[]) AS k(brand_id, crm_message_id)
         ON m.brand_id = k.brand_id AND m.crm_message_id = k.crm_message_id
      WHERE m.accepted_on BETWEEN $3::date AND $4::date`,
    [keys.map((key) => key.brandId.toString()), keys.map((key) => key.crmMessageId.toString()), ...dedupeDays(window)],
  );
  for (const row of rows) found.set(`${row.brand_id}:${row.crm_message_id}`, row.id);
  return found;
}

/**
 * One message as a member of the JSON array storeMessages sends: a single parameter, serialized by
 * JSON.stringify, where arrays of a dozen columns had the driver quote and escape every element.
 * The payload and headers are objects inside it (PostgreSQL takes their text as it is, `json` and
 * `jsonb`); `meta` is a string holding the CRM's exact text, cast to `json` on insert.
 */
const toRecord = (m: NewMessage) => ({
  id: m.id,
  accepted_on: uuidV7Day(m.id),
  brand_id: m.brandId.toString(),
  crm_message_id: m.crmMessageId.toString(),
  user_id: m.userId,
  activity_id: m.activityId.toString(),
  action_group_id: m.actionGroupId.toString(),
  action_id: m.actionId.toString(),
  trigger_hash: m.triggerHash,
  origin: m.origin,
  payload: m.payload,
  meta: m.meta,
  crm_headers: m.crmHeaders,
});

/** What became of one message given to storeMessages, in the order given. */
export interface StoredMessage {
  /** The push id of this key accepted earlier (a retry), if any. */
  knownId: string | null;
  /** Set when this message was inserted now: its id. */
  insertedId: string | null;
  /** Whether its player has an active device in its brand. */
  reachable: boolean;
  /** The providers of the deliveries inserted with it. */
  providers: ProviderName[];
}

/**
 * Accepts messages in one statement: finds the keys already accepted (dedupe window) and the
 * players' active devices, and inserts, in key order (no deadlock), the messages of reachable
 * players, each naming one delivery per device (ids, devices, providers). A concurrent insert of a
 * key waits, then skips. Around midnight two attempts of a key may go to two day partitions: the
 * caller then runs this serializable (acceptIsolation), and one of them fails and is tried again.
 */
export async function storeMessages(sql: Sql, messages: NewMessage[], window: DedupeWindow = DEFAULT_DEDUPE): Promise<StoredMessage[]> {
  if (!messages.length) return [];
  const { rows } = await sql.query<{ n: string; knownId: string | null; inserted: boolean; reachable: boolean; providers: ProviderName[] | null }>(
    `WITH input AS (
       SELECT * FROM ROWS FROM (json_to_recordset($1::json) AS (
                       id uuid, accepted_on date, brand_id bigint, crm_message_id bigint, user_id text, activity_id bigint, action_group_id bigint,
                       action_id bigint, trigger_hash text, origin text, payload json, meta text, crm_headers jsonb))
                WITH ORDINALITY AS i(id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id,
                                     trigger_hash, origin, payload, meta, crm_headers, n)),
     -- Per message: the push id of its key if accepted before, and its player's active devices.
     -- Each is a lookup through its index (OFFSET 0 and the aggregate keep them lookups whatever
     -- the statistics, which lag far behind a burst), and nothing below joins two sets: the
     -- planner takes an INSERT ... RETURNING for one row, and a join it plans from that can go
     -- quadratic on a batch.
     targets AS MATERIALIZED (
       SELECT i.*, k.id AS known_id, v.device_ids, v.providers
         FROM input i
         LEFT JOIN LATERAL (
           SELECT m.id FROM messages m
            WHERE m.brand_id = i.brand_id AND m.crm_message_id = i.crm_message_id AND m.accepted_on BETWEEN $2::date AND $3::date
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
     SELECT t.n, t.known_id AS "knownId", t.id = ANY(ARRAY(SELECT id FROM inserted)) AS inserted,
            t.device_ids IS NOT NULL AS reachable, t.providers
       FROM targets t
      ORDER BY t.n`,
    [JSON.stringify(messages.map(toRecord)), ...dedupeDays(window)],
  );
  return rows.map((row, i) => ({
    knownId: row.knownId,
    insertedId: row.inserted ? messages[i].id : null,
    reachable: row.reachable,
    providers: row.inserted ? [...new Set(row.providers ?? [])] : [],
  }));
}

/** Within this long of midnight (UTC), two attempts of one push may fall on two days. */
export const DAY_BOUNDARY_MARGIN_MS = 5 * 60_000;

/**
 * The isolation an accepting transaction needs at `now`: serializable within
 * DAY_BOUNDARY_MARGIN_MS of midnight (UTC), where two concurrent attempts of one push can go to two
 * day partitions (each reads the other's partition, so one of them fails with a serialization
 * failure and is tried again), read committed otherwise (the day's unique index is enough). The
 * margin covers the accepting transaction's length and the gateways' clock skew.
 */
export function acceptIsolation(now = Date.now()): 'serializable' | 'read committed' {
  const intoDay = now % DAY_MS;
  return intoDay < DAY_BOUNDARY_MARGIN_MS || intoDay > DAY_MS - DAY_BOUNDARY_MARGIN_MS ? 'serializable' : 'read committed';
}
