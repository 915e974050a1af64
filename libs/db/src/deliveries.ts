import type { ProviderName } from '@operator/contract';
import type { Sql } from './client';
import { LIVE_LEASE } from './claims';

// A push's deliveries: their one shape (delivery-shape), the send leases that claim them (claims),
// the record of their outcomes and the pushes' settlement (recording), and the reconciler's look
// for those whose job was lost (here).
export * from './delivery-shape';
export * from './claims';
export * from './recording';

/**
 * Pushes with pending deliveries of this provider that nothing moved for `afterMs` and that no live
 * send lease holds: their job was lost (Redis lost its last writes, a queue was flushed, a job
 * failed after its attempts). Found through the index of open delivery rows and the index of open
 * pushes (a delivery with no row moves with its push), each one is touched (its row, or its push),
 * so the next look finds it again only if it is still stranded `afterMs` later.
 */
export async function takeStrandedPushes(sql: Sql, provider: ProviderName, afterMs: number, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ messageId: string }>(
    `WITH stranded AS (
       SELECT d.id, d.accepted_on FROM deliveries d
        WHERE d.open AND d.provider = $1::text AND d.updated_at < now() - $2 * interval '1 millisecond'
          AND NOT ${LIVE_LEASE('d.message_id', '$1::text')}
        ORDER BY d.updated_at LIMIT $3 FOR UPDATE OF d SKIP LOCKED)
     UPDATE deliveries d SET updated_at = now() FROM stranded s WHERE d.id = s.id AND d.accepted_on = s.accepted_on
     RETURNING d.message_id AS "messageId"`,
    [provider, afterMs, limit],
  );
  const { rows: onPushes } = await sql.query<{ messageId: string }>(
    `WITH stranded AS (
       SELECT m.id, m.accepted_on FROM messages m
        WHERE m.open AND m.updated_at < now() - $2 * interval '1 millisecond' AND $1::text = ANY(m.providers)
          AND EXISTS (SELECT 1 FROM push_deliveries(ARRAY[m.id], ARRAY[m.accepted_on]) x
                       WHERE x.provider = $1::text AND x.status = 'pending' AND x.updated_at < now() - $2 * interval '1 millisecond')
          AND NOT ${LIVE_LEASE('m.id', '$1::text')}
        ORDER BY m.updated_at LIMIT $3 FOR UPDATE OF m SKIP LOCKED)
     UPDATE messages m SET updated_at = now() FROM stranded s WHERE m.id = s.id AND m.accepted_on = s.accepted_on
     RETURNING m.id AS "messageId"`,
    [provider, afterMs, limit],
  );
  return [...new Set([...rows, ...onPushes].map((row) => row.messageId))];
}
