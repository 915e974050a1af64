import type { Platform, ProviderName } from '@operator/contract';
import { v7 as uuidv7 } from 'uuid';
import type pg from 'pg';
import type { Sql } from './client';
import { daysOfIds } from './partitions';

/**
 * `column` (a partition key) is one of the days in parameter `param` (a date[]). The statements
 * send the days of the rows they touch, so PostgreSQL plans and locks only those days' partitions
 * (the parameter's value is known when an unnamed statement is planned).
 */
const IN_DAYS = (column: string, param: string) => `${column} = ANY(${param}::date[])`;

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
  /** The push's only delivery, of any provider: no other worker records one of its deliveries. */
  alone: boolean;
  /**
   * The push's only delivery, with no delivery row: its outcome is recorded on the push itself
   * (recordSoleOutcomes), not in a row of its own.
   */
  sole: boolean;
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

/**
 * A delivery still to be sent: pending, or `sending` under a claim older than the lease (a claim
 * made per delivery, by a worker of a version before send leases, that died).
 */
const CLAIMABLE = (alias: string) =>
  `(${alias}.status::text = 'pending' OR (${alias}.status::text = 'sending' AND ${alias}.claimed_at < now() - $3 * interval '1 millisecond'))`;

/**
 * SQL: whether a live send lease of `provider` names push `pushId` (both SQL expressions), looked up
 * through the leases' index (send_lease_live(), see the send_lease_lookups migration).
 */
export const LIVE_LEASE = (pushId: string, provider: string) => `send_lease_live(${pushId}, ${provider})`;

/**
 * SQL: the status (text) of a delivery of push `m` as it stands: its row `d` (left joined: all
 * null when the delivery has none), or, for the only delivery of a push of one device, what the push
 * records of it once final (see recordSoleOutcomes); pending until then.
 */
export const DELIVERY_STATE = (m: string, d: string) =>
  `COALESCE(${d}.status::text, CASE WHEN cardinality(${m}.delivery_ids) = 1 AND ${m}.open IS NULL AND ${m}.attempts IS NOT NULL
                                    THEN (CASE WHEN ${m}.sent_at IS NULL THEN 'failed' ELSE 'sent' END) ELSE 'pending' END)`;

/** SQL: a column of a delivery's outcome (see DELIVERY_STATE): `rowColumn` of its row, or `pushColumn` of its push for the only delivery of a push of one device with no row. */
export const DELIVERY_OUTCOME = (m: string, d: string, rowColumn: string, pushColumn: string) =>
  `CASE WHEN ${d}.id IS NULL AND cardinality(${m}.delivery_ids) = 1 THEN ${m}.${pushColumn} ELSE ${d}.${rowColumn} END`;

/**
 * Takes a send lease on those of the pushes no other live lease of the provider names, and answers
 * the others (held by another job). The lease is written (and committed) first, then the live
 * leases that name the same pushes are looked for, and those pushes are given up: of two jobs that
 * take the same push, the second to look sees the first (each looks after its own commit), so at
 * most one of them keeps it; both may give it up, and it waits for a later run. No lock, so takers
 * never wait for each other. Each statement commits on its own: `pool` is never a connection inside
 * a transaction.
 */
async function takeSendLease(pool: Sql, leaseId: string, provider: ProviderName, wanted: string[], leaseMs: number, lapsedGraceMs: number): Promise<string[]> {
  await pool.query(
    `INSERT INTO send_leases (id, provider, push_ids, lease_until) VALUES ($1, $2::text, $3::uuid[], clock_timestamp() + $4 * interval '1 millisecond')`,
    [leaseId, provider, wanted, leaseMs],
  );
  try {
    // Through the leases' index, however many dead rows the table holds (send_lease_conflicts(),
    // see the send_lease_lookups migration).
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
 * Takes this provider's deliveries still to send of these pushes for this worker: those the push
 * names with no row yet, and those an earlier try left pending (in their row, or on the push for
 * the only delivery of a push of one device: `sole`, see recordSoleOutcomes). The claim is a lease on the pushes,
 * one row for the whole job (takeSendLease): while it lives, no other job sends these pushes'
 * deliveries of this provider; a lease older than `leaseMs` belonged to a worker that died, and its
 * pushes are taken again. Nothing is written to the deliveries until an outcome is known. They are
 * read after the lease is taken, so every outcome recorded under an earlier lease is seen. A
 * delivery whose device was removed since comes with no token.
 *
 * The pushes, their rows and their devices are found one by one (OFFSET 0 keeps each a lookup
 * through its index, not a join the planner may turn into a scan: with its estimate of a few hundred
 * deliveries a job, it hashed the whole devices table), and status is compared as text: during a
 * burst the planner's statistics lag far behind the table (there are none before its first
 * analyze), and a plan from them scans every delivery of the provider for each job.
 *
 * `lapsedGraceMs`: a lease that lapsed less than that long ago still holds its pushes. A worker
 * that was itself cut off from PostgreSQL a moment ago gives one (see OutageClock): the worker that
 * took the lease may have been cut off too, and be about to renew it and record what it sent.
 */
export async function claimDeliveries(pool: Sql, pushIds: string[], provider: ProviderName, leaseMs: number, lapsedGraceMs = 0): Promise<Claim> {
  const leaseId = uuidv7();
  const wanted = [...new Set(pushIds)];
  const held = await takeSendLease(pool, leaseId, provider, wanted, leaseMs, lapsedGraceMs);
  if (held.length === wanted.length) return { leaseId: null, deliveries: [], messages: new Map(), heldElsewhere: held.length, missing: [] };
  let rows: ClaimRow[];
  try {
    ({ rows } = await pool.query<ClaimRow>(
      `WITH wanted AS (SELECT DISTINCT id FROM unnest($1::uuid[]) AS p(id) WHERE NOT (p.id = ANY($5::uuid[]))),
       pushes AS MATERIALIZED (
         SELECT m.* FROM wanted w CROSS JOIN LATERAL (
           SELECT m.id, m.brand_id, m.payload, m.delivery_ids, m.device_ids, m.providers, m.open, m.attempts FROM messages m
            WHERE m.id = w.id AND ${IN_DAYS('m.accepted_on', '$4')}
           OFFSET 0) m),
       -- The rows of earlier tries (left pending), and every row of a push accepted before pushes
       -- named their deliveries.
       tried AS MATERIALIZED (
         SELECT x.* FROM pushes p CROSS JOIN LATERAL (
           SELECT d.id, d.message_id, d.device_id, d.attempts, d.status, d.claimed_at FROM deliveries d
            WHERE d.message_id = p.id AND d.provider = $2::text AND ${IN_DAYS('d.accepted_on', '$4')}
           OFFSET 0) x),
       -- The deliveries the push names with no row: untried, or the only one of a push whose tries
       -- are recorded on the push (its attempts; final once the push is closed).
       claimed AS (
         SELECT t.id, t.message_id, t.device_id, t.attempts, false AS sole FROM tried t WHERE ${CLAIMABLE('t')}
         UNION ALL
         SELECT u.id, p.id, u.device_id, COALESCE(p.attempts, 0), cardinality(p.delivery_ids) = 1
           FROM pushes p CROSS JOIN LATERAL unnest(p.delivery_ids, p.device_ids, p.providers) AS u(id, device_id, provider)
          WHERE u.provider = $2::text AND NOT EXISTS (SELECT 1 FROM tried t WHERE t.id = u.id)
            AND (cardinality(p.delivery_ids) > 1 OR p.open))
       SELECT 'delivery' AS kind, c.id, c.message_id AS "messageId", c.device_id AS "deviceId", v.token,
              v.platform::text AS platform, v.p256dh, v.auth, COALESCE(v.active, false) AS "deviceActive", c.attempts + 1 AS attempts,
              COALESCE(cardinality(p.delivery_ids), (SELECT count(*) FROM deliveries x WHERE x.message_id = c.message_id AND ${IN_DAYS('x.accepted_on', '$4')})) = 1 AS alone,
              c.sole,
              p.brand_id::text AS "brandId",
              CASE WHEN row_number() OVER (PARTITION BY c.message_id ORDER BY c.id) = 1 THEN p.payload END AS payload
         FROM claimed c JOIN pushes p ON p.id = c.message_id
         LEFT JOIN LATERAL (SELECT v.token, v.platform, v.p256dh, v.auth, v.active FROM devices v WHERE v.id = c.device_id OFFSET 0) v ON true
       UNION ALL
       SELECT 'missing', w.id, w.id, NULL, NULL, NULL, NULL, NULL, false, NULL, false, false, NULL, NULL
         FROM wanted w WHERE NOT EXISTS (SELECT 1 FROM pushes p WHERE p.id = w.id)`,
      [wanted, provider, leaseMs, daysOfIds(wanted), held],
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

export type DeliveryOutcome =
  | { deliveryId: string; status: 'sent'; providerMessageId: string | null }
  | { deliveryId: string; status: 'failed'; errorCode: string; error: string }
  /** Not sent this time; back to pending for the job's next attempt, with the reason kept. */
  | { deliveryId: string; status: 'pending'; errorCode: string; error: string };

/**
 * Records what became of each claimed delivery (`pushIds`: the push of each), in one statement:
 * the delivery's one write of a try, an insert at its first (its attempts count the tries). Only a
 * delivery not final yet takes an outcome, except that `sent` always wins over a failure: a worker
 * whose lease lapsed (a long outage) cannot turn back what another worker recorded since. Only a
 * delivery left pending is in the reconciler's index (open); a final outcome takes it out. Rows and
 * messages are found by primary key (`= ANY` of the ids), never by a join the planner may turn into
 * a scan of the day's partition; each row takes its outcome by a lookup of its id (OUTCOME_OF), and
 * each push is looked up for its outcome, so that no row is compared with every outcome.
 */
export async function recordOutcomes(sql: Sql, outcomes: DeliveryOutcome[], pushIds: string[]): Promise<void> {
  if (!outcomes.length) return;
  // An insert may not meet its own row twice.
  const chosen = oneOutcomeEach(outcomes, pushIds);
  const pick = <T>(get: (outcome: DeliveryOutcome) => T) => chosen.map(({ outcome }) => get(outcome));
  const STILL_OPEN = (row: string, outcomeStatus: string) => `(${row}.status IN ('pending', 'sending') OR (${outcomeStatus} = 'sent' AND ${row}.status <> 'sent'))`;
  await sql.query(
    `WITH o AS (
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $7::uuid[])
                  AS o(id, status, provider_message_id, error_code, error, push_id)),
     -- Each outcome by its delivery's id, for the update (a lookup, not a join: see OUTCOME).
     by_id AS MATERIALIZED (
       SELECT ${OUTCOMES_BY('o.id')} AS outcomes FROM o),
     -- A row an earlier try left (or one written at acceptance, before pushes named their deliveries).
     updated AS (
       UPDATE deliveries d
          SET status = ${OUTCOME_OF('by_id.outcomes', 'd', 'status')}::"DeliveryStatus",
              provider_message_id = COALESCE(${OUTCOME_OF('by_id.outcomes', 'd', 'provider_message_id')}, d.provider_message_id),
              error_code = ${OUTCOME_OF('by_id.outcomes', 'd', 'error_code')}, error = ${OUTCOME_OF('by_id.outcomes', 'd', 'error')},
              sent_at = CASE WHEN ${OUTCOME_OF('by_id.outcomes', 'd', 'status')} = 'sent' THEN now() ELSE d.sent_at END,
              attempts = d.attempts + 1, claimed_at = NULL, updated_at = now(), open = CASE WHEN ${OUTCOME_OF('by_id.outcomes', 'd', 'status')} = 'pending' THEN true END
         FROM by_id
        WHERE d.id = ANY($1::uuid[]) AND ${IN_DAYS('d.accepted_on', '$6')} AND ${STILL_OPEN('d', OUTCOME_OF('by_id.outcomes', 'd', 'status'))}
       RETURNING d.id),
     -- The first try of a delivery: its row, as its push names it (the push looked up for each
     -- outcome). A row another writer inserted meanwhile (a worker whose lease lapsed) is updated by
     -- the same rule.
     fresh AS (
       SELECT o.*, u.device_id, u.provider, m.accepted_on
         FROM o CROSS JOIN LATERAL (
           SELECT m.accepted_on, m.delivery_ids, m.device_ids, m.providers FROM messages m
            WHERE m.id = o.push_id AND ${IN_DAYS('m.accepted_on', '$6')} OFFSET 0) m
        CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) AS u(id, device_id, provider)
        WHERE u.id = o.id AND o.id NOT IN (SELECT id FROM updated))
     INSERT INTO deliveries AS d (id, accepted_on, message_id, device_id, provider, status, provider_message_id, error_code, error,
                                  attempts, sent_at, open)
     SELECT f.id, f.accepted_on, f.push_id, f.device_id, f.provider, f.status::"DeliveryStatus", f.provider_message_id, f.error_code, f.error,
            1, CASE WHEN f.status = 'sent' THEN now() END, CASE WHEN f.status = 'pending' THEN true END
       FROM fresh f ORDER BY f.id
     ON CONFLICT (message_id, device_id, accepted_on) DO UPDATE
        SET status = EXCLUDED.status,
            provider_message_id = COALESCE(EXCLUDED.provider_message_id, d.provider_message_id),
            error_code = EXCLUDED.error_code, error = EXCLUDED.error,
            sent_at = CASE WHEN EXCLUDED.status = 'sent' THEN now() ELSE d.sent_at END,
            attempts = d.attempts + 1, claimed_at = NULL, updated_at = now(), open = EXCLUDED.open
      WHERE ${STILL_OPEN('d', 'EXCLUDED.status')}`,
    [
      pick((o) => o.deliveryId),
      pick((o) => o.status),
      pick((o) => (o.status === 'sent' ? o.providerMessageId : null)),
      pick((o) => (o.status === 'sent' ? null : o.errorCode)),
      pick((o) => (o.status === 'sent' ? null : o.error.slice(0, 1000))),
      daysOfIds(pushIds),
      chosen.map(({ pushId }) => pushId),
    ],
  );
}

/** One outcome a delivery, with its push: a sent one if any, else the last. */
function oneOutcomeEach(outcomes: DeliveryOutcome[], pushIds: string[]): { outcome: DeliveryOutcome; pushId: string }[] {
  const byDelivery = new Map<string, { outcome: DeliveryOutcome; pushId: string }>();
  outcomes.forEach((outcome, i) => {
    const kept = byDelivery.get(outcome.deliveryId);
    if (!kept || kept.outcome.status !== 'sent') byDelivery.set(outcome.deliveryId, { outcome, pushId: pushIds[i] });
  });
  return [...byDelivery.values()];
}

/**
 * Records the outcomes of pushes' only deliveries that have no delivery row (claimed `sole`) on the
 * pushes themselves, and settles them: the push's one write of a try, where recordOutcomes and
 * settleMessages would insert a delivery row and update the push. Only a push still open (its
 * delivery not final) takes an outcome: once final, a later one (a worker whose lease lapsed in a
 * long outage) is dropped. A final outcome closes the push (out of the reconciler's index) and, if
 * the push is still accepted, moves it to `sent` or `failed` (the error code as its error) and
 * writes its status event (the outbox); a push a device's report moved on already keeps its status.
 * A `pending` one counts the try and keeps its error, and leaves the push open, its updated_at
 * moved on as a pending delivery row's would be. The pushes are found by primary key, so they are
 * locked in id order (the order of an index scan of `= ANY`), like lockMessages'; the ids are an
 * array the statement builds (as settleMessages'), since with them as a parameter and no statistics
 * yet, the planner read the whole day's partition (4,366 rows for a job of 100). Each push's
 * outcome is looked up by its id (OUTCOME), not joined. Answers the pushes that moved.
 */
export async function recordSoleOutcomes(sql: Sql, outcomes: DeliveryOutcome[], pushIds: string[]): Promise<SettledMessage[]> {
  if (!outcomes.length) return [];
  const chosen = oneOutcomeEach(outcomes, pushIds).sort((a, b) => (a.pushId < b.pushId ? -1 : a.pushId > b.pushId ? 1 : 0));
  const settled: SettledMessage[] = [];
  // A push a device's report moved on while this statement waited for its lock is missed by both
  // updates (each reads the statuses of its own start): the next statement, a moment later, sees it.
  for (let pass = 0; chosen.length && pass < 2; pass++) {
    const pick = <T>(get: (outcome: DeliveryOutcome) => T) => chosen.map(({ outcome }) => get(outcome));
    const pushes = chosen.map(({ pushId }) => pushId);
    const { rows } = await sql.query<SettledMessage & { moved: boolean }>(
      `WITH o AS MATERIALIZED (
         SELECT ${OUTCOMES_BY('o.push_id')} AS by_push
           FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[]) AS o(push_id, status, provider_message_id, error_code, error)),
       moved AS (
         UPDATE messages m
            SET status = CASE WHEN ${OUTCOME('status')} = 'pending' THEN m.status ELSE ${OUTCOME('status')}::"MessageStatus" END,
                error = CASE WHEN ${OUTCOME('status')} = 'failed' THEN ${OUTCOME('error_code')} END,
                ${SOLE_OUTCOME}
           FROM o
          WHERE m.id = ANY(ARRAY(SELECT unnest($1::uuid[]))) AND ${IN_DAYS('m.accepted_on', '$6')}
            AND m.open AND cardinality(m.delivery_ids) = 1 AND m.status = 'accepted'
          RETURNING m.id, m.status::text AS status, m.error),
       -- Moved on by a device's report (delivered, say) before its send was recorded.
       recorded AS (
         UPDATE messages m SET ${SOLE_OUTCOME}
           FROM o
          WHERE m.id = ANY(ARRAY(SELECT unnest($1::uuid[]))) AND ${IN_DAYS('m.accepted_on', '$6')}
            AND m.open AND cardinality(m.delivery_ids) = 1 AND m.status <> 'accepted'
          RETURNING m.id),
       evented AS (
         INSERT INTO events (id, topic, ordering_key, push_id, status, error)
         SELECT uuid_v7(), 'push.status', s.id::text, s.id, s.status, s.error FROM moved s WHERE s.status <> 'accepted' ORDER BY s.id)
       SELECT id, status, error, status <> 'accepted' AS moved FROM moved
       UNION ALL
       SELECT id, NULL, NULL, false FROM recorded`,
      [
        pushes,
        pick((o) => o.status),
        pick((o) => (o.status === 'sent' ? o.providerMessageId : null)),
        pick((o) => (o.status === 'sent' ? null : o.errorCode)),
        pick((o) => (o.status === 'sent' ? null : o.error.slice(0, 1000))),
        daysOfIds(pushes),
      ],
    );
    for (const { moved, ...row } of rows) if (moved) settled.push(row);
    const done = new Set(rows.map((row) => row.id));
    chosen.splice(0, chosen.length, ...chosen.filter(({ pushId }) => !done.has(pushId)));
  }
  return settled;
}

/**
 * The outcomes of a statement's `o` (rows of status, provider_message_id, error_code, error) as one
 * object keyed by `key` (`o.id`: a delivery's id; `o.push_id`: a push's), for OUTCOME_OF.
 */
const OUTCOMES_BY = (key: string) =>
  `jsonb_object_agg(${key}, jsonb_build_object('status', o.status, 'provider_message_id', o.provider_message_id, 'error_code', o.error_code, 'error', o.error))`;

/**
 * A field of the outcome of `row` (a delivery, or a push), looked up by its id in `outcomes` (from
 * OUTCOMES_BY: a binary search of its keys), so that no row is joined to the outcomes. A join
 * there was a nested loop that compared each row with every outcome whenever the planner took the
 * rows still open to be a handful, as it does with a day's statistics (most of the day settled) or
 * none yet: 141,000 comparisons for a job of 376 pushes (120 ms a statement in `npm run bench`'s
 * end to end, 250 µs of PostgreSQL's time a message).
 */
const OUTCOME_OF = (outcomes: string, row: string, field: 'status' | 'provider_message_id' | 'error_code' | 'error') =>
  `(${outcomes} -> ${row}.id::text ->> '${field}')`;

/** A field of the outcome of push `m`, in recordSoleOutcomes. */
const OUTCOME = (field: Parameters<typeof OUTCOME_OF>[2]) => OUTCOME_OF('o.by_push', 'm', field);

/** The columns a try of a push's only delivery sets on the push (its OUTCOME), see recordSoleOutcomes. */
const SOLE_OUTCOME = `attempts = COALESCE(m.attempts, 0) + 1,
                provider_message_id = ${OUTCOME('provider_message_id')}, error_code = ${OUTCOME('error_code')}, error_detail = ${OUTCOME('error')},
                sent_at = CASE WHEN ${OUTCOME('status')} = 'sent' THEN now() END,
                open = CASE WHEN ${OUTCOME('status')} = 'pending' THEN true END,
                updated_at = now()`;

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

/**
 * Locks the messages still to be settled or closed (open) among these, in id order (so that two
 * writers never wait for each other), and answers their ids: the settlement that follows in the same transaction then
 * sees every delivery another writer recorded before it. A push with one delivery needs no lock
 * (the record of that delivery already waits for any other writer of it), and is not given here.
 */
export async function lockMessages(sql: Sql, pushIds: string[]): Promise<string[]> {
  if (!pushIds.length) return [];
  const { rows } = await sql.query<{ id: string }>(
    `SELECT m.id FROM messages m
      WHERE m.id = ANY($1::uuid[]) AND ${IN_DAYS('m.accepted_on', '$2')} AND (m.status::text = 'accepted' OR m.open) ORDER BY m.id FOR NO KEY UPDATE`,
    [pushIds, daysOfIds(pushIds)],
  );
  return rows.map((row) => row.id);
}

export interface SettledMessage {
  id: string;
  status: 'sent' | 'failed';
  error: string | null;
}

/** A figure of push `m`'s tally in settleMessages (`errors`: text; the counts: bigint), looked up by its id. */
const TALLY = (field: 'sent' | 'final' | 'rows' | 'errors') => `(x.by_push -> m.id::text ->> '${field}')${field === 'errors' ? '' : '::bigint'}`;

/**
 * Moves accepted messages forward from their deliveries: `sent` as soon as one device accepted
 * it, `failed` (with the reasons) once every delivery the push names has a final row and none was
 * sent. Each change writes its status event in the same statement (the outbox). Answers the
 * messages that changed; a message already moved on is left alone. A message is closed (open null:
 * out of the reconciler's index) once every delivery it names is final, in the same update for a
 * push of one device. Deliveries are counted push by push, through their index, and the messages
 * are found by primary key, whatever the statistics say (see claimDeliveries): planned from them,
 * the update read the whole day's partition to find a hundred messages. Each takes its tally by a
 * lookup of its id (as a delivery its outcome, see OUTCOME_OF).
 */
export async function settleMessages(sql: Sql, pushIds: string[]): Promise<SettledMessage[]> {
  if (!pushIds.length) return [];
  const { rows } = await sql.query<SettledMessage>(
    `WITH tally AS (
       SELECT p.id AS message_id, t.*
         FROM (SELECT DISTINCT id FROM unnest($1::uuid[]) AS p(id)) p
        CROSS JOIN LATERAL (
          SELECT count(*) FILTER (WHERE d.status::text = 'sent') AS sent,
                 count(*) FILTER (WHERE d.status::text IN ('sent', 'failed')) AS final,
                 count(*) AS rows,
                 string_agg(DISTINCT d.error_code, ', ' ORDER BY d.error_code) AS errors
            FROM deliveries d WHERE d.message_id = p.id AND ${IN_DAYS('d.accepted_on', '$2')} HAVING count(*) > 0) t),
     -- Each push's tally by its id, for the updates (a lookup, not a join: see OUTCOME_OF).
     tallies AS MATERIALIZED (
       SELECT jsonb_object_agg(message_id, jsonb_build_object('sent', sent, 'final', final, 'rows', rows, 'errors', errors)) AS by_push FROM tally),
     moved AS (
       UPDATE messages m
          SET status = CASE WHEN ${TALLY('sent')} > 0 THEN 'sent' ELSE 'failed' END::"MessageStatus",
              error = CASE WHEN ${TALLY('sent')} > 0 THEN NULL ELSE ${TALLY('errors')} END,
              open = CASE WHEN ${TALLY('final')} = COALESCE(cardinality(m.delivery_ids), ${TALLY('rows')}) THEN NULL ELSE m.open END,
              updated_at = now()
         FROM tallies x
        WHERE m.id = ANY(ARRAY(SELECT message_id FROM tally)) AND ${IN_DAYS('m.accepted_on', '$2')}
          AND m.status = 'accepted' AND (${TALLY('sent')} > 0 OR ${TALLY('final')} = COALESCE(cardinality(m.delivery_ids), ${TALLY('rows')}))
        RETURNING m.id, m.status::text AS status, m.error),
     closed AS (
       UPDATE messages m SET open = NULL, updated_at = now()
         FROM tallies x
        WHERE m.id = ANY(ARRAY(SELECT message_id FROM tally)) AND ${IN_DAYS('m.accepted_on', '$2')}
          AND m.open AND ${TALLY('final')} = cardinality(m.delivery_ids) AND m.id NOT IN (SELECT id FROM moved)),
     evented AS (
       INSERT INTO events (id, topic, ordering_key, push_id, status, error)
       SELECT uuid_v7(), 'push.status', s.id::text, s.id, s.status, s.error FROM moved s ORDER BY s.id)
     SELECT id, status, error FROM moved`,
    [pushIds, daysOfIds(pushIds)],
  );
  return rows;
}

/**
 * Pushes with deliveries of this provider still to send that nothing has moved for `afterMs` and
 * that no live send lease holds: their job was lost (Redis lost its last writes, a queue was
 * flushed, a job was removed or failed after its attempts). Two kinds: a delivery an earlier try
 * left pending (through the index of open deliveries), and an open push whose deliveries of this
 * provider were never tried (through the index of open messages). Each one found is
 * touched (the delivery, or the message), so the next look finds it again only if it is still
 * stranded `afterMs` later; a push of two providers, both stranded, may so wait one `afterMs` more
 * for the second. A delivery found final after all (recorded by a worker older than that index)
 * leaves the index.
 */
export async function takeStrandedPushes(sql: Sql, provider: ProviderName, afterMs: number, leaseMs: number, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ messageId: string; open: boolean | null }>(
    `WITH stranded AS (
       SELECT d.id, d.accepted_on, d.status::text IN ('pending', 'sending') AS open FROM deliveries d
        WHERE d.open AND d.provider = $1::text
          AND d.updated_at < now() - $2 * interval '1 millisecond'
          AND (d.status::text <> 'sending' OR d.claimed_at IS NULL OR d.claimed_at < now() - $3 * interval '1 millisecond')
          AND NOT ${LIVE_LEASE('d.message_id', '$1::text')}
        ORDER BY d.updated_at LIMIT $4 FOR UPDATE OF d SKIP LOCKED)
     UPDATE deliveries d SET updated_at = now(), open = CASE WHEN s.open THEN true END
       FROM stranded s WHERE d.id = s.id AND d.accepted_on = s.accepted_on
     RETURNING d.message_id AS "messageId", d.open`,
    [provider, afterMs, leaseMs, limit],
  );
  const { rows: untried } = await sql.query<{ messageId: string }>(
    `WITH stranded AS (
       SELECT m.id, m.accepted_on FROM messages m
        WHERE m.open AND m.updated_at < now() - $2 * interval '1 millisecond' AND $1::text = ANY(m.providers)
          AND EXISTS (SELECT 1 FROM unnest(m.delivery_ids, m.providers) AS u(id, provider)
                       WHERE u.provider = $1::text AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = u.id AND d.accepted_on = m.accepted_on))
          AND NOT ${LIVE_LEASE('m.id', '$1::text')}
        ORDER BY m.updated_at LIMIT $3 FOR UPDATE OF m SKIP LOCKED)
     UPDATE messages m SET updated_at = now() FROM stranded s WHERE m.id = s.id AND m.accepted_on = s.accepted_on
     RETURNING m.id AS "messageId"`,
    [provider, afterMs, limit],
  );
  return [...new Set([...rows.filter((row) => row.open).map((row) => row.messageId), ...untried.map((row) => row.messageId)])];
}

/** A delivery as it stands: its row, or what its push records of it (see readDeliveries). */
export interface DeliveryState {
  id: string;
  messageId: string;
  deviceId: string | null;
  provider: ProviderName;
  status: 'pending' | 'sending' | 'sent' | 'failed';
  providerMessageId: string | null;
  errorCode: string | null;
  error: string | null;
  attempts: number;
  sentAt: Date | null;
}

/**
 * Every delivery of these pushes as it stands, in id order: a delivery's row when it has one;
 * the only delivery of a push of one device, from what the push records of it (recordSoleOutcomes);
 * pending when not tried yet. For operators' queries and the specs: the hot paths read what they
 * need themselves.
 */
export async function readDeliveries(sql: Sql, pushIds: string[]): Promise<DeliveryState[]> {
  const { rows } = await sql.query<DeliveryState>(
    `SELECT u.id, m.id AS "messageId", u.device_id AS "deviceId", u.provider::text AS provider, ${DELIVERY_STATE('m', 'd')} AS status,
            ${DELIVERY_OUTCOME('m', 'd', 'provider_message_id', 'provider_message_id')} AS "providerMessageId",
            ${DELIVERY_OUTCOME('m', 'd', 'error_code', 'error_code')} AS "errorCode",
            ${DELIVERY_OUTCOME('m', 'd', 'error', 'error_detail')} AS error,
            COALESCE(${DELIVERY_OUTCOME('m', 'd', 'attempts', 'attempts')}, 0) AS attempts,
            ${DELIVERY_OUTCOME('m', 'd', 'sent_at', 'sent_at')} AS "sentAt"
       FROM messages m
      CROSS JOIN LATERAL (
        SELECT x.id, x.device_id, x.provider FROM unnest(m.delivery_ids, m.device_ids, m.providers) AS x(id, device_id, provider)
        UNION ALL
        SELECT x.id, x.device_id, x.provider FROM deliveries x WHERE m.delivery_ids IS NULL AND x.message_id = m.id AND x.accepted_on = m.accepted_on) u
       LEFT JOIN deliveries d ON d.id = u.id AND d.accepted_on = m.accepted_on
      WHERE m.id = ANY($1::uuid[]) AND ${IN_DAYS('m.accepted_on', '$2')}
      ORDER BY u.id`,
    [pushIds, daysOfIds(pushIds)],
  );
  return rows;
}
