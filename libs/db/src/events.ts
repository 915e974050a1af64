import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';

export const PUSH_STATUS_TOPIC = 'push.status';

/** The order a push moves through; a report never moves it back. `sent` and `failed` are the same step. */
export const STATUS_RANK: Record<string, number> = { accepted: 0, sent: 1, failed: 1, delivered: 2, opened: 3, clicked: 4 };
export type EngagementType = 'delivered' | 'opened' | 'clicked';

export type EngagementResult = { found: false } | { found: true; changed: boolean; status: string };

/**
 * Records what the player's device reported. The message moves forward only; a duplicate or late
 * report changes nothing and writes no event. A report that arrives before the worker recorded the
 * send writes `sent` first, so the CRM sees the steps in order.
 */
export async function recordEngagement(sql: Sql, pushId: string, type: EngagementType): Promise<EngagementResult> {
  const { rows } = await sql.query<{ status: string }>(`SELECT status::text AS status FROM messages WHERE id = $1 FOR UPDATE`, [pushId]);
  if (!rows.length) return { found: false };
  const current = rows[0].status;
  if (STATUS_RANK[type] <= STATUS_RANK[current]) return { found: true, changed: false, status: current };
  const steps = current === 'accepted' ? ['sent', type] : [type];
  await sql.query(`UPDATE messages SET status = $2::"MessageStatus", updated_at = now() WHERE id = $1`, [pushId, type]);
  await sql.query(
    `INSERT INTO events (id, topic, ordering_key, push_id, status)
     SELECT e.id, $1, $2::text, $2::text::uuid, e.status FROM unnest($3::uuid[], $4::text[]) WITH ORDINALITY AS e(id, status, n) ORDER BY e.n`,
    [PUSH_STATUS_TOPIC, pushId, steps.map(() => uuidv7()), steps],
  );
  return { found: true, changed: true, status: type };
}

/** A push status event with what the CRM needs: the push's activity ids and its meta as sent. */
export interface PushEventRow {
  id: string;
  feedSeq: string;
  pushId: string;
  status: string;
  error: string | null;
  occurredAt: Date;
  /** The CRM's `meta` as it wrote it (raw JSON text), or null. */
  meta: string | null;
  crmMessageId: string;
  brandId: string;
  userId: string;
  activityId: string;
  actionGroupId: string;
  actionId: string;
  triggerHash: string;
}

/** Positions of one transaction's events in the feed (events_feed_position() in the migrations). */
const FEED_POSITIONS = 65536;

const PUSH_EVENT_COLUMNS = `e.id, e.feed_seq::text AS "feedSeq", e.push_id AS "pushId", e.status, e.error, e.occurred_at AS "occurredAt",
  m.meta::text AS meta, m.crm_message_id::text AS "crmMessageId", m.brand_id::text AS "brandId", m.user_id AS "userId",
  m.activity_id::text AS "activityId", m.action_group_id::text AS "actionGroupId", m.action_id::text AS "actionId",
  m.trigger_hash AS "triggerHash"`;

export interface PushFeedPage {
  rows: PushEventRow[];
  /** Committed events after these that wait for an older transaction, still running, to end. */
  held: boolean;
}

/**
 * Push status events after `after` (a feed_seq), in feed order: only those of transactions older
 * than the snapshot's xmin, every one of which has ended, so no event can later appear before the
 * last one answered. Reads only: it works in a read-only transaction and on a replica.
 */
export async function readPushFeed(sql: Sql, after: bigint, limit: number): Promise<PushFeedPage> {
  const { rows } = await sql.query<PushEventRow & { final: boolean }>(
    `SELECT ${PUSH_EVENT_COLUMNS}, e.feed_seq < h.horizon AS final
       FROM events e JOIN messages m ON m.id = e.push_id
            CROSS JOIN (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint * ${FEED_POSITIONS} AS horizon) h
      WHERE e.topic = $1 AND e.feed_seq > $2 ORDER BY e.feed_seq LIMIT $3`,
    [PUSH_STATUS_TOPIC, after.toString(), limit],
  );
  const held = rows.findIndex((row) => !row.final);
  const answered = held < 0 ? rows : rows.slice(0, held);
  return { rows: answered.map(({ final: _final, ...row }) => row), held: held >= 0 };
}

export interface PushStatusRow {
  id: string;
  status: string;
  error: string | null;
  meta: string | null;
  createdAt: Date;
  updatedAt: Date;
  deliveries: { provider: string; status: string; error: string | null }[];
}

/** The current state of the given pushes, with each delivery's outcome. */
export async function readPushStatus(sql: Sql, pushIds: string[]): Promise<PushStatusRow[]> {
  const { rows } = await sql.query<PushStatusRow>(
    `SELECT m.id, m.status::text AS status, m.error, m.meta::text AS meta, m.created_at AS "createdAt", m.updated_at AS "updatedAt",
            COALESCE(json_agg(json_build_object('provider', d.provider, 'status', d.status, 'error', d.error_code) ORDER BY d.id)
                     FILTER (WHERE d.id IS NOT NULL), '[]') AS deliveries
       FROM messages m LEFT JOIN deliveries d ON d.message_id = m.id
      WHERE m.id = ANY($1::uuid[])
      GROUP BY m.id`,
    [pushIds],
  );
  return rows;
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

/** The push events of `ids` with their message's activity ids and meta. */
export async function pushEventRows(sql: Sql, ids: string[]): Promise<PushEventRow[]> {
  const { rows } = await sql.query<PushEventRow>(
    `SELECT ${PUSH_EVENT_COLUMNS} FROM events e JOIN messages m ON m.id = e.push_id WHERE e.id = ANY($1::uuid[])`,
    [ids],
  );
  return rows;
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
