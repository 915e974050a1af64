import type { Platform, Provider } from '@operator/contract';
import type { Sql } from './client';

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
}

export interface ClaimedMessage {
  id: string;
  brandId: string;
  payload: unknown;
}

export interface Claim {
  deliveries: ClaimedDelivery[];
  messages: Map<string, ClaimedMessage>;
  /** Deliveries of these pushes that another worker holds right now. */
  heldElsewhere: number;
}

/** Push ids that are not in the database (not committed yet, or never: the request was rolled back). */
export async function findMissingMessages(sql: Sql, pushIds: string[]): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(`SELECT id FROM messages WHERE id = ANY($1::uuid[])`, [pushIds]);
  const found = new Set(rows.map((row) => row.id));
  return pushIds.filter((id) => !found.has(id));
}

/**
 * Takes the provider's pending deliveries of these pushes for this worker: each moves to
 * `sending`, so no other worker sends it while the claim lasts. A `sending` delivery whose claim is
 * older than `leaseMs` belonged to a worker that died, and is taken again.
 */
export async function claimDeliveries(sql: Sql, pushIds: string[], provider: Provider, leaseMs: number): Promise<Claim> {
  const { rows } = await sql.query<ClaimedDelivery>(
    `WITH claimed AS (
       UPDATE deliveries d
          SET status = 'sending', claimed_at = now(), attempts = d.attempts + 1, updated_at = now()
        WHERE d.message_id = ANY($1::uuid[]) AND d.provider = $2::"Provider"
          AND (d.status = 'pending' OR (d.status = 'sending' AND d.claimed_at < now() - $3 * interval '1 millisecond'))
        RETURNING d.id, d.message_id, d.device_id)
     SELECT c.id, c.message_id AS "messageId", c.device_id AS "deviceId", v.token, v.platform::text AS platform,
            v.p256dh, v.auth, COALESCE(v.active, false) AS "deviceActive"
       FROM claimed c LEFT JOIN devices v ON v.id = c.device_id
      ORDER BY c.message_id, c.id`,
    [pushIds, provider, leaseMs],
  );
  const messageIds = [...new Set(rows.map((row) => row.messageId))];
  const [messages, held] = await Promise.all([
    sql.query<ClaimedMessage>(`SELECT id, brand_id::text AS "brandId", payload FROM messages WHERE id = ANY($1::uuid[])`, [messageIds]),
    sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM deliveries
        WHERE message_id = ANY($1::uuid[]) AND provider = $2::"Provider" AND status = 'sending' AND NOT (id = ANY($3::uuid[]))`,
      [pushIds, provider, rows.map((row) => row.id)],
    ),
  ]);
  return {
    deliveries: rows,
    messages: new Map(messages.rows.map((message) => [message.id, message])),
    heldElsewhere: held.rows[0].n,
  };
}

export type DeliveryOutcome =
  | { deliveryId: string; status: 'sent'; providerMessageId: string | null }
  | { deliveryId: string; status: 'failed'; errorCode: string; error: string }
  /** Not sent this time; back to pending for the job's next attempt, with the reason kept. */
  | { deliveryId: string; status: 'pending'; errorCode: string; error: string };

/**
 * Records what became of each claimed delivery, in one statement. Only a delivery still being
 * sent takes an outcome, except that `sent` always wins over a failure: a worker whose claim
 * lapsed (a long outage) cannot turn back what another worker recorded since.
 */
export async function recordOutcomes(sql: Sql, outcomes: DeliveryOutcome[]): Promise<void> {
  if (!outcomes.length) return;
  const pick = <T>(get: (outcome: DeliveryOutcome) => T) => outcomes.map(get);
  await sql.query(
    `UPDATE deliveries d
        SET status = o.status::"DeliveryStatus",
            provider_message_id = COALESCE(o.provider_message_id, d.provider_message_id),
            error_code = o.error_code, error = o.error,
            sent_at = CASE WHEN o.status = 'sent' THEN now() ELSE d.sent_at END,
            claimed_at = NULL, updated_at = now()
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[])
            AS o(id, status, provider_message_id, error_code, error)
      WHERE d.id = o.id AND (d.status = 'sending' OR (o.status = 'sent' AND d.status <> 'sent'))`,
    [
      pick((o) => o.deliveryId),
      pick((o) => o.status),
      pick((o) => (o.status === 'sent' ? o.providerMessageId : null)),
      pick((o) => (o.status === 'sent' ? null : o.errorCode)),
      pick((o) => (o.status === 'sent' ? null : o.error.slice(0, 1000))),
    ],
  );
}

/** Devices whose token the provider declared dead: they get no more pushes until registered again. */
export async function deactivateDevices(sql: Sql, devices: { id: string; reason: string }[]): Promise<void> {
  if (!devices.length) return;
  await sql.query(
    `UPDATE devices d SET active = false, deactivated_at = now(), deactivated_reason = r.reason, updated_at = now()
       FROM unnest($1::uuid[], $2::text[]) AS r(id, reason)
      WHERE d.id = r.id AND d.active`,
    [devices.map((d) => d.id), devices.map((d) => d.reason)],
  );
}

export interface SettledMessage {
  id: string;
  status: 'sent' | 'failed';
  error: string | null;
}

/**
 * Moves accepted messages forward from their deliveries: `sent` as soon as one device accepted
 * it, `failed` (with the reasons) once every delivery is final and none was sent. Each change
 * writes its status event in the same statement (the outbox). Answers the messages that changed; a
 * message already moved on is left alone.
 */
export async function settleMessages(sql: Sql, pushIds: string[]): Promise<SettledMessage[]> {
  if (!pushIds.length) return [];
  const { rows } = await sql.query<SettledMessage>(
    `WITH tally AS (
       SELECT message_id,
              count(*) FILTER (WHERE status = 'sent') AS sent,
              count(*) FILTER (WHERE status IN ('pending', 'sending')) AS open,
              string_agg(DISTINCT error_code, ', ' ORDER BY error_code) AS errors
         FROM deliveries WHERE message_id = ANY($1::uuid[]) GROUP BY message_id),
     settled AS (
       UPDATE messages m
          SET status = CASE WHEN t.sent > 0 THEN 'sent' ELSE 'failed' END::"MessageStatus",
              error = CASE WHEN t.sent > 0 THEN NULL ELSE t.errors END,
              updated_at = now()
         FROM tally t
        WHERE m.id = t.message_id AND m.status = 'accepted' AND (t.sent > 0 OR t.open = 0)
        RETURNING m.id, m.status::text AS status, m.error),
     evented AS (
       INSERT INTO events (id, topic, ordering_key, push_id, status, error)
       SELECT gen_random_uuid(), 'push.status', s.id::text, s.id, s.status, s.error FROM settled s ORDER BY s.id)
     SELECT id, status, error FROM settled`,
    [pushIds],
  );
  return rows;
}

/** Keeps this worker's claims alive while it still holds them (sending, or sent and not yet recorded). */
export async function extendClaims(sql: Sql, deliveryIds: string[]): Promise<void> {
  if (!deliveryIds.length) return;
  await sql.query(`UPDATE deliveries SET claimed_at = now() WHERE id = ANY($1::uuid[]) AND status = 'sending'`, [deliveryIds]);
}

/** Gives back claims on deliveries this worker will not send after all (shutdown): pending again, for any worker. */
export async function releaseClaims(sql: Sql, deliveryIds: string[]): Promise<number> {
  if (!deliveryIds.length) return 0;
  const { rowCount } = await sql.query(
    `UPDATE deliveries SET status = 'pending', claimed_at = NULL, updated_at = now() WHERE id = ANY($1::uuid[]) AND status = 'sending'`,
    [deliveryIds],
  );
  return rowCount ?? 0;
}

/**
 * Pushes with deliveries of this provider that nothing has moved for `afterMs`: pending, or
 * claimed by a worker whose lease lapsed. Their job was lost (Redis lost its last writes, a queue
 * was flushed, a job was removed or failed after its attempts). Each one found is touched, so the
 * next look finds it again only if it is still stranded `afterMs` later.
 */
export async function takeStrandedPushes(sql: Sql, provider: Provider, afterMs: number, leaseMs: number, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ messageId: string }>(
    `WITH stranded AS (
       SELECT id FROM deliveries
        WHERE status IN ('pending', 'sending') AND provider = $1::"Provider"
          AND updated_at < now() - $2 * interval '1 millisecond'
          AND (status = 'pending' OR claimed_at IS NULL OR claimed_at < now() - $3 * interval '1 millisecond')
        ORDER BY updated_at LIMIT $4 FOR UPDATE SKIP LOCKED)
     UPDATE deliveries d SET updated_at = now() FROM stranded s WHERE d.id = s.id
     RETURNING d.message_id AS "messageId"`,
    [provider, afterMs, leaseMs, limit],
  );
  return [...new Set(rows.map((row) => row.messageId))];
}
