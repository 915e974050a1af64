import type { Platform, ProviderName } from '@operator/contract';
import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';
import { daysOfIds } from './partitions';

/** A delivery this worker now owns, with what it takes to send it. */
export interface ClaimedDelivery {
  id: string;
  messageId: string;
  deviceId: string | null;
  /** Null when the device was removed after the push was accepted. */
  token: string | null;
  platform: Platform | null;
  p256dh: string | null;
  auth: string | null;
  deviceActive: boolean;
  /** Tries of this delivery so far, this one included, whatever job made them. */
  attempts: number;
}

export interface ClaimedMessage {
  id: string;
  brandId: string;
  payload: unknown;
}

export interface Claim {
  /** The lease this job holds on its pushes (null when another job holds all of them). */
  leaseId: string | null;
  deliveries: ClaimedDelivery[];
  messages: Map<string, ClaimedMessage>;
  /** Pushes of the job whose deliveries another job holds right now. */
  heldElsewhere: number;
  /** Push ids that are not in the database (not committed yet, or never: the request was rolled back). */
  missing: string[];
}

interface ClaimRow extends ClaimedDelivery {
  kind: 'delivery' | 'missing';
  brandId: string | null;
  /** Once per message, on its first delivery. */
  payload: unknown;
}

/** SQL: whether a live send lease of `provider` names push `pushId` (send_lease_live(), through the leases' index). */
export const LIVE_LEASE = (pushId: string, provider: string) => `send_lease_live(${pushId}, ${provider})`;

/**
 * Takes a send lease on the pushes no other live lease of the provider names, and answers the
 * others. The lease is committed first, then the live leases naming the same pushes are looked for
 * and those pushes given up: of two jobs taking one push, the second to look sees the first, so at
 * most one keeps it (both may give it up; a later run takes it). No lock: takers never wait.
 */
async function takeSendLease(pool: Sql, leaseId: string, provider: ProviderName, wanted: string[], leaseMs: number, lapsedGraceMs: number): Promise<string[]> {
  await pool.query(
    `INSERT INTO send_leases (id, provider, push_ids, lease_until) VALUES ($1, $2::text, $3::uuid[], clock_timestamp() + $4 * interval '1 millisecond')`,
    [leaseId, provider, wanted, leaseMs],
  );
  try {
    const { rows } = await pool.query<{ held: string[] }>(`SELECT send_lease_conflicts($1, $2::uuid[], $3::text, $4) AS held`, [
      leaseId,
      wanted,
      provider,
      lapsedGraceMs,
    ]);
    const { held } = rows[0];
    if (held.length === wanted.length) await dropLeases(pool, [leaseId]);
    else if (held.length) {
      await pool.query(`UPDATE send_leases SET push_ids = ARRAY(SELECT unnest(push_ids) EXCEPT SELECT unnest($2::uuid[])) WHERE id = $1`, [leaseId, held]);
    }
    return held;
  } catch (error) {
    await dropLeases(pool, [leaseId]).catch(() => undefined);
    throw error;
  }
}

/**
 * Takes this provider's pending deliveries of these pushes under one send lease (takeSendLease),
 * writing nothing to them; read after the lease, so every outcome recorded under an earlier one is
 * seen. A lease older than `leaseMs` was a dead worker's; one lapsed less than `lapsedGraceMs` ago
 * still holds (see OutageClock). A removed device comes with no token. The read is the function
 * claim_deliveries (its migration), planned once per connection.
 */
export async function claimDeliveries(pool: Sql, pushIds: string[], provider: ProviderName, leaseMs: number, lapsedGraceMs = 0): Promise<Claim> {
  const leaseId = uuidv7();
  const wanted = [...new Set(pushIds)];
  const held = await takeSendLease(pool, leaseId, provider, wanted, leaseMs, lapsedGraceMs);
  if (held.length === wanted.length) return { leaseId: null, deliveries: [], messages: new Map(), heldElsewhere: held.length, missing: [] };
  const heldIds = new Set(held);
  const taken = wanted.filter((id) => !heldIds.has(id));
  let rows: ClaimRow[];
  try {
    ({ rows } = await pool.query<ClaimRow>(
      `SELECT kind, id, message_id AS "messageId", device_id AS "deviceId", token, platform, p256dh, auth, device_active AS "deviceActive",
              attempts, brand_id AS "brandId", payload
         FROM claim_deliveries($1::uuid[], $2::text, $3::date[])`,
      [taken, provider, daysOfIds(taken)],
    ));
  } catch (error) {
    // The lease would hold these pushes back from the job's next attempt until it lapsed.
    await dropLeases(pool, [leaseId]).catch(() => undefined);
    throw error;
  }
  const deliveries: ClaimedDelivery[] = [];
  const messages = new Map<string, ClaimedMessage>();
  const missing: string[] = [];
  for (const row of rows) {
    if (row.kind === 'missing') missing.push(row.messageId);
    else {
      const { kind: _kind, brandId, payload, ...delivery } = row;
      deliveries.push(delivery);
      if (!messages.has(row.messageId)) messages.set(row.messageId, { id: row.messageId, brandId: brandId!, payload });
    }
  }
  deliveries.sort((a, b) => (a.messageId === b.messageId ? (a.id < b.id ? -1 : 1) : a.messageId < b.messageId ? -1 : 1));
  return { leaseId, deliveries, messages, heldElsewhere: held.length, missing };
}

/** Keeps these send leases alive for another `leaseMs` (a job still sending, or outcomes not yet recorded). */
export async function renewLeases(sql: Sql, leaseIds: string[], leaseMs: number): Promise<void> {
  if (!leaseIds.length) return;
  await sql.query(`UPDATE send_leases SET lease_until = now() + $2 * interval '1 millisecond' WHERE id = ANY($1::uuid[])`, [leaseIds, leaseMs]);
}

/** Ends send leases: the job is done (its outcomes recorded), or gives its pushes back (shutdown). */
export async function dropLeases(sql: Sql, leaseIds: string[]): Promise<number> {
  if (!leaseIds.length) return 0;
  const { rowCount } = await sql.query(`DELETE FROM send_leases WHERE id = ANY($1::uuid[])`, [leaseIds]);
  return rowCount ?? 0;
}

/** Deletes the leases that lapsed more than `graceMs` ago: their workers died; nothing reads them any more. */
export async function dropLapsedLeases(sql: Sql, graceMs: number): Promise<number> {
  const { rowCount } = await sql.query(`DELETE FROM send_leases WHERE lease_until < now() - $1 * interval '1 millisecond'`, [graceMs]);
  return rowCount ?? 0;
}
