import type { ProviderName } from '@operator/contract';
import type { Sql } from './client';
import { daysOfIds } from './partitions';

// A delivery is read in one shape, whatever holds its outcome: push_deliveries(push ids, days), a
// SQL function (in the baseline migration) that every statement needing a delivery's state
// calls. It answers one row per delivery: id, message_id, accepted_on, device_id, provider, status
// ('pending' | 'sent' | 'failed'), attempts, provider_message_id, error_code, error, sent_at, updated_at.

/**
 * SQL: `column` (a partition key) is one of the days in parameter `param` (a date[]): statements
 * send the days of the rows they touch, so only those days' partitions are planned and locked.
 */
export const IN_DAYS = (column: string, param: string) => `${column} = ANY(${param}::date[])`;

/** A delivery as it stands (see push_deliveries). */
export interface DeliveryState {
  id: string;
  messageId: string;
  deviceId: string | null;
  provider: ProviderName;
  status: 'pending' | 'sent' | 'failed';
  providerMessageId: string | null;
  errorCode: string | null;
  error: string | null;
  attempts: number;
  sentAt: Date | null;
}

/** Every delivery of these pushes as it stands, in id order: for operators' queries and the specs. */
export async function readDeliveries(sql: Sql, pushIds: string[]): Promise<DeliveryState[]> {
  const { rows } = await sql.query<DeliveryState>(
    `SELECT x.id, x.message_id AS "messageId", x.device_id AS "deviceId", x.provider::text AS provider, x.status,
            x.provider_message_id AS "providerMessageId", x.error_code AS "errorCode", x.error, x.attempts, x.sent_at AS "sentAt"
       FROM push_deliveries($1::uuid[], $2::date[]) x
      ORDER BY x.id`,
    [pushIds, daysOfIds(pushIds)],
  );
  return rows;
}
