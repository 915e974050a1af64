import type { Prisma } from './generated/client';
import type { DbTx } from './client';

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
  payload: Prisma.InputJsonValue;
  meta: Prisma.InputJsonValue | undefined;
  crmHeaders: Prisma.InputJsonValue;
};

export interface NewDelivery {
  id: string;
  messageId: string;
  deviceId: string;
  provider: 'fcm' | 'apns' | 'webpush';
}

export const messageKey = (key: MessageKey) => `${key.brandId}:${key.crmMessageId}`;

/** push_id of every already accepted message among `keys`, by messageKey. */
export async function findPushIds(db: DbTx, keys: MessageKey[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (!keys.length) return found;
  const brands = keys.map((key) => key.brandId.toString());
  const crmIds = keys.map((key) => key.crmMessageId.toString());
  const rows = await db.$queryRaw<{ id: string; brand_id: bigint; crm_message_id: bigint }[]>`
    SELECT m.id::text AS id, m.brand_id, m.crm_message_id
    FROM messages m
    JOIN unnest(${brands}::text[]::bigint[], ${crmIds}::text[]::bigint[]) AS k(brand_id, crm_message_id)
      ON m.brand_id = k.brand_id AND m.crm_message_id = k.crm_message_id`;
  for (const row of rows) found.set(messageKey({ brandId: BigInt(row.brand_id), crmMessageId: BigInt(row.crm_message_id) }), row.id);
  return found;
}

/**
 * Inserts the messages that are not there yet (a concurrent insert of the same key waits for the
 * other transaction, then skips) and answers the ids it inserted.
 */
export async function insertMessages(db: DbTx, messages: NewMessage[]): Promise<Set<string>> {
  if (!messages.length) return new Set();
  const inserted = await db.message.createManyAndReturn({ data: messages, skipDuplicates: true, select: { id: true } });
  return new Set(inserted.map((row) => row.id));
}

export async function insertDeliveries(db: DbTx, deliveries: NewDelivery[]): Promise<void> {
  if (deliveries.length) await db.delivery.createMany({ data: deliveries });
}
