import type { ProviderName } from '@operator/contract';
import type { Sql } from './client';
import { addDays, DAY_MS, dayOf, uuidV7Day } from './partitions';

export interface MessageKey {
  brandId: bigint;
  crmMessageId: bigint;
}

export type NewMessage = MessageKey & {
  id: string;
  /**
   * The id of its first delivery (a UUIDv7), made with the push's own; PostgreSQL makes one when
   * it is absent, and for each further device. Made here, it costs PostgreSQL nothing.
   */
  deliveryId?: string;
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
  delivery_id: m.deliveryId,
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
 * The statement is the function accept_messages (its migration), planned once per connection.
 */
export async function storeMessages(sql: Sql, messages: NewMessage[], window: DedupeWindow = DEFAULT_DEDUPE): Promise<StoredMessage[]> {
  if (!messages.length) return [];
  const { text, values } = acceptStatement(messages, window);
  const { rows } = await sql.query<AcceptedRow>(text, values);
  return storedMessages(messages, rows);
}

/** A row of acceptStatement. */
export interface AcceptedRow {
  n: string;
  knownId: string | null;
  inserted: boolean;
  reachable: boolean;
  providers: ProviderName[] | null;
}

/** storeMessages' statement for these messages (not none), to send with its transaction's BEGIN (inTransactionFrom). */
export function acceptStatement(messages: NewMessage[], window: DedupeWindow = DEFAULT_DEDUPE): { text: string; values: unknown[] } {
  return {
    text: 'SELECT n, known_id AS "knownId", inserted, reachable, providers FROM accept_messages($1::json, $2::date, $3::date)',
    values: [JSON.stringify(messages.map(toRecord)), ...dedupeDays(window)],
  };
}

/** What acceptStatement's rows say of each message, in the order given. */
export function storedMessages(messages: NewMessage[], rows: AcceptedRow[]): StoredMessage[] {
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
