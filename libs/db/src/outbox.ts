import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';
import { PUSH_EVENT_COLUMNS, type PushEventRow } from './feed';

// The outbox: events written in the transaction of the change they report, claimed by the
// dispatchers, their results recorded, the undeliverable kept as dead letters.

/** An outbox event whose body is fixed now (bonus and balance events). */
export async function insertEvent(sql: Sql, event: { topic: string; orderingKey: string; status: string; body: string }): Promise<string> {
  const id = uuidv7();
  await sql.query(`INSERT INTO events (id, topic, ordering_key, status, body) VALUES ($1, $2, $3, $4, $5::json)`, [id, event.topic, event.orderingKey, event.status, event.body]);
  return id;
}

/** An event the dispatcher now owns until `lease`. */
export interface DueEvent {
  id: string;
  topic: string;
  pushId: string | null;
  status: string;
  error: string | null;
  /** Fixed body (bonus and balance events), raw JSON text. */
  body: string | null;
  occurredAt: Date;
  attempts: number;
  expiresAt: Date | null;
  /** When the claim lapses; also what identifies it (see releaseEventClaims). */
  lease: Date;
  /** A push event with its message, for its body; null for other topics (or a push that is gone). */
  push: PushEventRow | null;
}

/**
 * Takes up to `limit` events that are due, for the given topics, oldest first: only the first
 * pending event of each ordering key, so the events of one push (or one bonus) go out in order.
 * Each topic is walked in seq order on its own partial index of pending events, so neither the
 * delivered events nor another topic's backlog are read. Push events come with their message.
 */
export async function claimDueEvents(sql: Sql, topics: string[], limit: number, leaseMs: number): Promise<DueEvent[]> {
  if (!topics.length) return [];
  const { rows } = await sql.query<Omit<DueEvent, 'push'> & Omit<PushEventRow, 'crmMessageId'> & { crmMessageId: string | null }>(
    `WITH due AS (
       SELECT c.id, c.seq FROM unnest($1::text[]) AS t(topic) CROSS JOIN LATERAL (
         SELECT e.id, e.seq FROM events e
          WHERE e.topic = t.topic AND e.dispatch_state = 'pending' AND e.next_attempt_at <= now()
            AND (e.locked_until IS NULL OR e.locked_until < now())
            -- The first pending event of its key, found through the key's own events (a push has a
            -- handful). The state is compared as text so that no partial index of pending events can
            -- serve this probe: their statistics lag far behind a burst in a big table, and the
            -- planner then picked them as if empty, reading every pending event per candidate.
            AND e.seq = (SELECT p.seq FROM events p WHERE p.ordering_key = e.ordering_key AND p.dispatch_state::text = 'pending'
                          ORDER BY p.seq LIMIT 1)
          ORDER BY e.seq LIMIT $2 FOR UPDATE SKIP LOCKED) c
        ORDER BY c.seq LIMIT $2),
     claimed AS (
       UPDATE events e SET locked_until = now() + $3 * interval '1 millisecond'
         FROM due WHERE e.id = due.id
       RETURNING e.*)
     SELECT ${PUSH_EVENT_COLUMNS}, e.topic, e.body::text AS body, e.attempts, e.expires_at AS "expiresAt", e.locked_until AS lease
       FROM claimed e LEFT JOIN messages m ON m.id = e.push_id
      ORDER BY e.seq`,
    [topics, limit, leaseMs],
  );
  return rows.map((row) => ({
    id: row.id,
    topic: row.topic,
    pushId: row.pushId,
    status: row.status,
    error: row.error,
    body: row.body,
    occurredAt: row.occurredAt,
    attempts: row.attempts,
    expiresAt: row.expiresAt,
    lease: row.lease,
    push: row.pushId && row.crmMessageId !== null ? { ...row, crmMessageId: row.crmMessageId } : null,
  }));
}

export type DispatchResult =
  | { id: string; outcome: 'delivered' }
  | { id: string; outcome: 'retry'; nextAttemptAt: Date; error: string }
  | { id: string; outcome: 'dead'; error: string };

/**
 * Keeps a dispatcher's claims alive while it still holds the events (posted, result not yet
 * recorded). An event whose result is already recorded (its claim cleared) is left alone.
 */
export async function extendEventClaims(sql: Sql, ids: string[], leaseMs: number): Promise<void> {
  if (!ids.length) return;
  await sql.query(
    `UPDATE events SET locked_until = now() + $2 * interval '1 millisecond'
      WHERE id = ANY($1::uuid[]) AND dispatch_state = 'pending' AND locked_until IS NOT NULL`,
    [ids, leaseMs],
  );
}

/**
 * Gives back claims on events that will not be posted after all (too late to start within the
 * lease, or shutdown): each only while it is still the claim we took, never one another
 * dispatcher took after it lapsed.
 */
export async function releaseEventClaims(sql: Sql, claims: { id: string; lease: Date }[]): Promise<number> {
  if (!claims.length) return 0;
  const { rowCount } = await sql.query(
    `UPDATE events e SET locked_until = NULL FROM unnest($1::uuid[], $2::timestamptz[]) AS c(id, lease)
      WHERE e.id = c.id AND e.locked_until = c.lease AND e.dispatch_state = 'pending'`,
    [claims.map((claim) => claim.id), claims.map((claim) => claim.lease)],
  );
  return rowCount ?? 0;
}

/** Records what became of dispatched events, in one statement. */
export async function recordDispatch(sql: Sql, results: DispatchResult[]): Promise<void> {
  if (!results.length) return;
  await sql.query(
    `UPDATE events e
        SET dispatch_state = CASE r.outcome WHEN 'retry' THEN 'pending' ELSE r.outcome END::"DispatchState",
            attempts = e.attempts + 1,
            next_attempt_at = COALESCE(r.next_attempt_at, e.next_attempt_at),
            last_error = r.error,
            delivered_at = CASE WHEN r.outcome = 'delivered' THEN now() ELSE e.delivered_at END,
            locked_until = NULL
       FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::text[]) AS r(id, outcome, next_attempt_at, error)
      WHERE e.id = r.id AND e.dispatch_state = 'pending'`,
    [
      results.map((r) => r.id),
      results.map((r) => r.outcome),
      results.map((r) => (r.outcome === 'retry' ? r.nextAttemptAt : null)),
      results.map((r) => (r.outcome === 'delivered' ? null : r.error.slice(0, 1000))),
    ],
  );
}

export interface DeadLetter {
  id: string;
  topic: string;
  pushId: string | null;
  status: string;
  attempts: number;
  lastError: string | null;
  occurredAt: Date;
}

export async function listDeadLetters(sql: Sql, limit: number): Promise<DeadLetter[]> {
  const { rows } = await sql.query<DeadLetter>(
    `SELECT id, topic, push_id AS "pushId", status, attempts, last_error AS "lastError", occurred_at AS "occurredAt"
       FROM events WHERE dispatch_state = 'dead' ORDER BY seq LIMIT $1`,
    [limit],
  );
  return rows;
}

/** Sends dead letters again (all, or the given ones), with a fresh maximum age. */
export async function redriveDeadLetters(sql: Sql, maxAgeMs: number, ids?: string[]): Promise<number> {
  const { rowCount } = await sql.query(
    `UPDATE events SET dispatch_state = 'pending', attempts = 0, next_attempt_at = now(), locked_until = NULL,
            expires_at = now() + $1 * interval '1 millisecond'
      WHERE dispatch_state = 'dead' AND ($2::uuid[] IS NULL OR id = ANY($2::uuid[]))`,
    [maxAgeMs, ids ?? null],
  );
  return rowCount ?? 0;
}
