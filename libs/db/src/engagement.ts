import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';
import { uuidV7Day } from './partitions';
import { PUSH_STATUS_TOPIC } from './feed';

// What players' devices report about a push (delivered, opened, clicked), stored. Which reports
// move a push, and through which statuses, is the push domain's rule (@operator/push).

/** What became of a device's report: `sent` says whether the push was sent to any device. */
export type ReportRecord = { found: false } | { found: true; sent: boolean; changed: boolean; status: string };

/**
 * SQL: push `m` was sent to at least one device. Its status says so, moved to `sent` with its first
 * sent delivery; a `failed` push was sent only if a delivery was recorded sent after it failed (by a
 * worker whose lease lapsed).
 */
const SENT_TO_A_DEVICE = (m: string) => `(${m}.status::text IN ('sent', 'delivered', 'opened', 'clicked')
   OR (${m}.status::text = 'failed' AND EXISTS (SELECT 1 FROM push_deliveries(ARRAY[${m}.id], ARRAY[${m}.accepted_on]) x WHERE x.status = 'sent')))`;

/**
 * Records a device's report that push `pushId` reached `reported`, in one statement: the push is
 * locked, and moves to `reported` (with its status event in the outbox) only when it was sent to a
 * device and its status is one of `movesFrom`. A push not sent (still accepted, or failed on every
 * device) takes nothing, whatever the report; nor does one already further on. The check and the
 * change are one statement on the locked push, so a send recorded meanwhile is seen or waited for.
 */
export async function recordReport(sql: Sql, pushId: string, reported: string, movesFrom: string[]): Promise<ReportRecord> {
  const { rows } = await sql.query<{ status: string; sent: boolean; changed: boolean }>(
    `WITH target AS (
       SELECT m.id, m.accepted_on, m.status::text AS status, ${SENT_TO_A_DEVICE('m')} AS sent
         FROM messages m WHERE m.id = $1::uuid AND m.accepted_on = $2::date FOR UPDATE),
     moved AS (
       UPDATE messages m SET status = $3::text::"MessageStatus", updated_at = now()
         FROM target t
        WHERE m.id = t.id AND m.accepted_on = t.accepted_on AND t.sent AND t.status = ANY($4::text[])
       RETURNING m.id),
     evented AS (
       INSERT INTO events (id, topic, ordering_key, push_id, status)
       SELECT $5::uuid, $6::text, $1::uuid::text, m.id, $3::text FROM moved m)
     SELECT CASE WHEN EXISTS (SELECT 1 FROM moved) THEN $3::text ELSE t.status END AS status, t.sent, EXISTS (SELECT 1 FROM moved) AS changed
       FROM target t`,
    [pushId, uuidV7Day(pushId), reported, movesFrom, uuidv7(), PUSH_STATUS_TOPIC],
  );
  const row = rows[0];
  return row ? { found: true, ...row } : { found: false };
}
