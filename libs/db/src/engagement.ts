import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';
import { uuidV7Day } from './partitions';
import { PUSH_STATUS_TOPIC } from './feed';

// What players' devices report about a push (delivered, opened, clicked), stored. Which reports
// move a push, and through which statuses, is the push domain's rule (@operator/push).

/** Locks the push for a status change; undefined when there is no such push. */
export async function lockMessageStatus(sql: Sql, pushId: string): Promise<string | undefined> {
  const { rows } = await sql.query<{ status: string }>(`SELECT status::text AS status FROM messages WHERE id = $1 AND accepted_on = $2 FOR UPDATE`, [
    pushId,
    uuidV7Day(pushId),
  ]);
  return rows[0]?.status;
}

/**
 * Moves a locked push through `steps`, in order: its status becomes the last one, and each step
 * writes its status event to the outbox in the same transaction.
 */
export async function advanceMessage(sql: Sql, pushId: string, steps: string[]): Promise<void> {
  if (!steps.length) return;
  await sql.query(`UPDATE messages SET status = $2::"MessageStatus", updated_at = now() WHERE id = $1 AND accepted_on = $3`, [
    pushId,
    steps[steps.length - 1],
    uuidV7Day(pushId),
  ]);
  await sql.query(
    `INSERT INTO events (id, topic, ordering_key, push_id, status)
     SELECT e.id, $1, $2::text, $2::text::uuid, e.status FROM unnest($3::uuid[], $4::text[]) WITH ORDINALITY AS e(id, status, n) ORDER BY e.n`,
    [PUSH_STATUS_TOPIC, pushId, steps.map(() => uuidv7()), steps],
  );
}
