import type { Provider } from '@operator/contract';
import type { Sql } from './client';

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

export interface NewDelivery {
  id: string;
  messageId: string;
  deviceId: string;
  provider: Provider;
}

export const messageKey = (key: MessageKey) => `${key.brandId}:${key.crmMessageId}`;

const json = (value: unknown) => (value === undefined ? null : JSON.stringify(value));

// Bulk statements take one array per column and unnest them: a batch of 500 is one statement
// with a dozen parameters, whatever its size.

/** push_id of every already accepted message among `keys`, by messageKey. */
export async function findPushIds(sql: Sql, keys: MessageKey[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (!keys.length) return found;
  const { rows } = await sql.query<{ id: string; brand_id: string; crm_message_id: string }>(
    `SELECT m.id, m.brand_id::text, m.crm_message_id::text
       FROM messages m
       JOIN unnest($1::bigint[], $2::bigint[]) AS k(brand_id, crm_message_id)
         ON m.brand_id = k.brand_id AND m.crm_message_id = k.crm_message_id`,
    [keys.map((key) => key.brandId.toString()), keys.map((key) => key.crmMessageId.toString())],
  );
  for (const row of rows) found.set(`${row.brand_id}:${row.crm_message_id}`, row.id);
  return found;
}

/**
 * Inserts the messages that are not there yet (a concurrent insert of the same key waits for the
 * other transaction, then skips) and answers the ids it inserted.
 */
export async function insertMessages(sql: Sql, messages: NewMessage[]): Promise<Set<string>> {
  if (!messages.length) return new Set();
  const column = <T>(pick: (message: NewMessage) => T) => messages.map(pick);
  const { rows } = await sql.query<{ id: string }>(
    `INSERT INTO messages (id, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id,
                           trigger_hash, origin, payload, meta, crm_headers)
     SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
                          $8::text[], $9::text[], $10::json[], $11::json[], $12::jsonb[])
     ON CONFLICT (brand_id, crm_message_id) DO NOTHING
     RETURNING id`,
    [
      column((m) => m.id),
      column((m) => m.brandId.toString()),
      column((m) => m.crmMessageId.toString()),
      column((m) => m.userId),
      column((m) => m.activityId.toString()),
      column((m) => m.actionGroupId.toString()),
      column((m) => m.actionId.toString()),
      column((m) => m.triggerHash),
      column((m) => m.origin),
      column((m) => json(m.payload)),
      column((m) => m.meta),
      column((m) => json(m.crmHeaders)),
    ],
  );
  return new Set(rows.map((row) => row.id));
}

export async function insertDeliveries(sql: Sql, deliveries: NewDelivery[]): Promise<void> {
  if (!deliveries.length) return;
  await sql.query(
    `INSERT INTO deliveries (id, message_id, device_id, provider)
     SELECT id, message_id, device_id, provider::"Provider"
       FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[]) AS d(id, message_id, device_id, provider)`,
    [deliveries.map((d) => d.id), deliveries.map((d) => d.messageId), deliveries.map((d) => d.deviceId), deliveries.map((d) => d.provider)],
  );
}
