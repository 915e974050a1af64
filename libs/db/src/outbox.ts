import { v7 as uuidv7 } from 'uuid';
import type { BrandSet } from '@operator/config';
import type { Sql } from './client';
import { PUSH_EVENT_COLUMNS, type PushEventRow } from './feed';

// The outbox: an event is written in the transaction of the change it reports. Dispatchers take
// events by range of feed positions; only an event not delivered at its first try gets a
// dispatch_retries row, so a prompt delivery costs no write after the insert.

/** An outbox event whose body is fixed now (bonus and balance events). */
export async function insertEvent(sql: Sql, event: { topic: string; orderingKey: string; status: string; body: string; brandId?: string | null }): Promise<string> {
  const id = uuidv7();
  await sql.query(`INSERT INTO events (id, topic, ordering_key, status, body, brand_id) VALUES ($1, $2, $3, $4, $5::json, $6)`, [
    id,
    event.topic,
    event.orderingKey,
    event.status,
    event.body,
    event.brandId ?? null,
  ]);
  return id;
}

/** An event a dispatcher now owns: from a range (its first try) or from the retries. */
export interface DueEvent {
  id: string;
  topic: string;
  orderingKey: string;
  /** Insert order: a key's events go out in this order. */
  seq: string;
  pushId: string | null;
  status: string;
  error: string | null;
  /** Raw JSON of a fixed body (bonus and balance events). */
  body: string | null;
  occurredAt: Date;
  attempts: number;
  expiresAt: Date | null;
  source: 'range' | 'retry';
  /** An earlier event of its key is not through yet: this one waits behind it, as a retry. */
  blocked: boolean;
  /** A push event's message, for its body; null for other topics or a push that is gone. */
  push: PushEventRow | null;
}

/** A range of one topic's events a dispatcher holds until `leaseUntil`. */
export interface DispatchRange {
  id: string;
  topic: string;
  after: string;
  through: string;
  leaseUntil: Date;
  window?: EventWindow;
}

/** Bounds of occurred_at [from, to) around the events not through yet, so a statement reads only those day partitions. */
export interface EventWindow {
  from: string;
  to: string;
}

/** No bounds: every day's partition is read. */
export const ANY_TIME: EventWindow = { from: '-infinity', to: 'infinity' };

/**
 * From a day before the oldest event not through yet to a day ahead. The day of slack covers events
 * dated when their transaction began.
 */
export async function openEventWindow(sql: Sql, topics: string[]): Promise<EventWindow> {
  const { rows } = await sql.query<{ from: Date; to: Date }>(
    `SELECT LEAST(
              (SELECT min(f.occurred_at) FROM unnest($1::text[]) AS t(topic) CROSS JOIN LATERAL (
                 SELECT e.occurred_at FROM events e WHERE e.topic = t.topic AND e.feed_seq > ${settledPosition('t.topic')}
                  ORDER BY e.feed_seq LIMIT 1) f),
              (SELECT min(f.occurred_at) FROM unnest($1::text[]) AS t(topic) CROSS JOIN LATERAL (
                 SELECT e.occurred_at FROM dispatch_retries r JOIN events e ON e.id = r.event_id
                  WHERE r.topic = t.topic AND r.state = 'pending' ORDER BY r.seq LIMIT 1) f),
              now()) - interval '1 day' AS "from",
            now() + interval '1 day' AS "to"`,
    [topics],
  );
  return { from: rows[0].from.toISOString(), to: rows[0].to.toISOString() };
}

const IN_WINDOW = (e: string, from: string, to: string) => `${e}.occurred_at >= ${from}::timestamptz AND ${e}.occurred_at < ${to}::timestamptz`;

type EventRow = Omit<DueEvent, 'push'> & Omit<PushEventRow, 'crmMessageId'> & { crmMessageId: string | null };

const EVENT_COLUMNS = `${PUSH_EVENT_COLUMNS}, e.topic, e.ordering_key AS "orderingKey", e.seq::text AS seq, e.body::text AS body`;

function toDueEvent(row: EventRow): DueEvent {
  return {
    id: row.id,
    topic: row.topic,
    orderingKey: row.orderingKey,
    seq: row.seq,
    pushId: row.pushId,
    status: row.status,
    error: row.error,
    body: row.body,
    occurredAt: row.occurredAt,
    attempts: row.attempts,
    expiresAt: row.expiresAt,
    source: row.source,
    blocked: row.blocked,
    push: row.pushId && row.crmMessageId !== null ? { ...row, crmMessageId: row.crmMessageId } : null,
  };
}

/**
 * An event's message, as `m`, looked up by primary key in its day partition (uuid_v7_day). OFFSET 0
 * keeps it a lookup: as a join the planner may read every message while statistics lag a burst.
 */
export const MESSAGE_OF = (e: string) =>
  `LATERAL (SELECT * FROM messages WHERE id = ${e}.push_id AND accepted_on = uuid_v7_day(${e}.push_id) OFFSET 0) m ON true`;

/** SQL for the position at or below which every event of `topic` was handed out and its range completed. */
export const settledPosition = (topic: string, exceptRange = 'NULL::uuid') =>
  `COALESCE(LEAST((SELECT sc.position FROM dispatch_cursors sc WHERE sc.topic = ${topic}),
                  (SELECT min(sr.after_position) FROM dispatch_ranges sr WHERE sr.topic = ${topic} AND sr.id IS DISTINCT FROM ${exceptRange})), 0)`;

/**
 * Whether an earlier event of `e`'s key (outside the range being read) is not through yet. The
 * OFFSET 0 fence keeps the planner from probing by (topic, feed_seq), which reads the whole topic
 * in a partition without statistics.
 */
const BLOCKED = (settled: string, after: string, through: string, window: [string, string], e = 'e') =>
  `EXISTS (SELECT 1 FROM (SELECT p.id, p.topic, p.feed_seq FROM events p
                           WHERE p.ordering_key = ${e}.ordering_key AND p.seq < ${e}.seq AND ${IN_WINDOW('p', ...window)} OFFSET 0) p
            WHERE p.topic = ${e}.topic
              AND NOT (p.feed_seq > ${after} AND p.feed_seq <= ${through})
              AND ((p.feed_seq > ${settled} AND NOT EXISTS (SELECT 1 FROM dispatch_retries x WHERE x.event_id = p.id))
                   OR EXISTS (SELECT 1 FROM dispatch_retries x WHERE x.event_id = p.id AND x.state = 'pending')))`;

/**
 * Takes a lapsed range, else the next events after the topic's cursor. Only events below the
 * snapshot's xmin horizon are taken, so none can later commit behind the cursor.
 */
export async function takeRange(sql: Sql, topic: string, limit: number, leaseMs: number, window: EventWindow = ANY_TIME): Promise<DispatchRange | null> {
  const columns = `id, topic, after_position::text AS after, through_position::text AS through, lease_until AS "leaseUntil"`;
  // A lapsed range is retaken under a new id, so its old holder can neither renew nor complete it.
  const { rows: retaken } = await sql.query<DispatchRange>(
    `WITH lapsed AS (
       DELETE FROM dispatch_ranges WHERE id = (
         SELECT id FROM dispatch_ranges WHERE topic = $1 AND lease_until < now() ORDER BY after_position LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING topic, after_position, through_position)
     INSERT INTO dispatch_ranges (id, topic, after_position, through_position, lease_until)
     SELECT $2, topic, after_position, through_position, now() + $3 * interval '1 millisecond' FROM lapsed
     RETURNING ${columns}`,
    [topic, uuidv7(), leaseMs],
  );
  if (retaken.length) return { ...retaken[0], window };
  // Twice at most: the second time after making the topic's cursor, if it had none.
  for (let tries = 0; tries < 2; tries++) {
    const { rows } = await sql.query<DispatchRange>(
      `WITH cursor AS (SELECT position FROM dispatch_cursors WHERE topic = $1 FOR UPDATE),
       horizon AS (SELECT events_feed_base(pg_snapshot_xmin(pg_current_snapshot())::text::bigint) AS position),
       next AS (
         SELECT e.feed_seq FROM events e
          WHERE e.topic = $1 AND e.feed_seq > (SELECT position FROM cursor) AND e.feed_seq < (SELECT position FROM horizon)
            AND ${IN_WINDOW('e', '$5', '$6')}
          ORDER BY e.feed_seq LIMIT $2),
       span AS (SELECT (SELECT position FROM cursor) AS after, max(feed_seq) AS through FROM next HAVING count(*) > 0),
       moved AS (UPDATE dispatch_cursors c SET position = span.through FROM span WHERE c.topic = $1)
       INSERT INTO dispatch_ranges (id, topic, after_position, through_position, lease_until)
       SELECT $3, $1, span.after, span.through, now() + $4 * interval '1 millisecond' FROM span
       RETURNING ${columns}`,
      [topic, limit, uuidv7(), leaseMs, window.from, window.to],
    );
    if (rows.length) return { ...rows[0], window };
    // No events to take, or no cursor yet for this topic: it starts before its first event.
    const { rowCount } = await sql.query(`INSERT INTO dispatch_cursors (topic, position) VALUES ($1, 0) ON CONFLICT (topic) DO NOTHING`, [topic]);
    if (!rowCount) return null;
  }
  return null;
}

/** A range's events in seq order, without those its earlier holder already moved to the retries. */
export async function rangeEvents(sql: Sql, range: DispatchRange): Promise<DueEvent[]> {
  const { rows } = await sql.query<EventRow>(
    `WITH settled AS (SELECT ${settledPosition('$1', '$4::uuid')} AS position)
     SELECT ${EVENT_COLUMNS}, 0 AS attempts, NULL::timestamptz AS "expiresAt", 'range' AS source,
            ${BLOCKED('(SELECT position FROM settled)', '$2::bigint', '$3::bigint', ['$5', '$6'])} AS blocked
       FROM events e LEFT JOIN ${MESSAGE_OF('e')}
      WHERE e.topic = $1 AND e.feed_seq > $2::bigint AND e.feed_seq <= $3::bigint AND ${IN_WINDOW('e', '$5', '$6')}
        AND NOT EXISTS (SELECT 1 FROM dispatch_retries r WHERE r.event_id = e.id)
      ORDER BY e.seq`,
    [range.topic, range.after, range.through, range.id, (range.window ?? ANY_TIME).from, (range.window ?? ANY_TIME).to],
  );
  return rows.map(toDueEvent);
}

export interface ClaimedRetry {
  event: DueEvent;
  lease: Date;
}

/** Due retries, oldest first: only the first pending retry of a key, and only when nothing earlier of the key is in flight. */
export async function claimRetries(sql: Sql, topics: string[], limit: number, leaseMs: number, window: EventWindow = ANY_TIME): Promise<ClaimedRetry[]> {
  if (!topics.length) return [];
  // Planning the claim below takes milliseconds (it reads the day partitions of events and
  // messages), and most polls find no retry due: the pending index answers that first.
  const { rows: due } = await sql.query<{ due: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM dispatch_retries r WHERE r.topic = ANY($1::text[]) AND r.state = 'pending' AND r.next_attempt_at <= now()
                      AND (r.locked_until IS NULL OR r.locked_until < now())) AS due`,
    [topics],
  );
  if (!due[0].due) return [];
  const { rows } = await sql.query<EventRow & { lease: Date }>(
    `WITH due AS (
       SELECT c.event_id FROM unnest($1::text[]) AS t(topic) CROSS JOIN LATERAL (
         SELECT r.event_id, r.seq FROM dispatch_retries r
          WHERE r.topic = t.topic AND r.state = 'pending' AND r.next_attempt_at <= now()
            AND (r.locked_until IS NULL OR r.locked_until < now())
            AND r.seq = (SELECT p.seq FROM dispatch_retries p WHERE p.ordering_key = r.ordering_key AND p.topic = r.topic AND p.state = 'pending'
                          ORDER BY p.seq LIMIT 1)
            AND NOT ${BLOCKED(settledPosition('r.topic'), '0', '0', ['$4', '$5'], 'r')}
          ORDER BY r.seq LIMIT $2 FOR UPDATE SKIP LOCKED) c),
     claimed AS (
       UPDATE dispatch_retries r SET locked_until = now() + $3 * interval '1 millisecond'
         FROM due WHERE r.event_id = due.event_id
       RETURNING r.*),
     rows AS (
       SELECT ${EVENT_COLUMNS}, c.attempts, c.expires_at AS "expiresAt", 'retry' AS source, c.locked_until AS lease, false AS blocked
         FROM claimed c JOIN events e ON e.id = c.event_id LEFT JOIN ${MESSAGE_OF('e')})
     SELECT * FROM rows ORDER BY seq::bigint`,
    [topics, limit, leaseMs, window.from, window.to],
  );
  return rows.map((row) => ({ event: toDueEvent(row), lease: row.lease }));
}

export type DispatchOutcome = 'delivered' | 'retry' | 'dead' | 'held';

/** `held`: not posted, it waits behind an earlier event of its key as a retry due now. */
export type DispatchResult =
  | { event: DueEvent; outcome: 'delivered' | 'held' }
  | { event: DueEvent; outcome: 'retry'; nextAttemptAt: Date; error: string }
  | { event: DueEvent; outcome: 'dead'; error: string };

/**
 * Records results in one statement: a delivered first try writes nothing. Deleting the `completed`
 * ranges in the same statement is what makes their events count as through.
 */
export async function recordDispatch(sql: Sql, results: DispatchResult[], completed: string[] = []): Promise<void> {
  const written = results.filter((r) => !(r.event.source === 'range' && r.outcome === 'delivered'));
  if (!written.length && !completed.length) return;
  const pick = <T>(get: (result: DispatchResult) => T) => written.map(get);
  await sql.query(
    `WITH r AS (
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::timestamptz[], $8::text[], $9::timestamptz[])
                AS r(id, topic, ordering_key, seq, source, outcome, next_attempt_at, error, expires_at)),
     firsts AS (
       INSERT INTO dispatch_retries (event_id, topic, ordering_key, seq, state, attempts, next_attempt_at, expires_at, last_error)
       SELECT r.id, r.topic, r.ordering_key, r.seq, CASE r.outcome WHEN 'dead' THEN 'dead' ELSE 'pending' END::"DispatchState",
              CASE r.outcome WHEN 'held' THEN 0 ELSE 1 END, COALESCE(r.next_attempt_at, now()), r.expires_at, r.error
         FROM r WHERE r.source = 'range'
       ON CONFLICT (event_id) DO NOTHING),
     again AS (
       UPDATE dispatch_retries d
          SET state = CASE r.outcome WHEN 'held' THEN 'pending' WHEN 'retry' THEN 'pending' ELSE r.outcome END::"DispatchState",
              attempts = d.attempts + CASE r.outcome WHEN 'held' THEN 0 ELSE 1 END,
              next_attempt_at = COALESCE(r.next_attempt_at, d.next_attempt_at),
              last_error = CASE r.outcome WHEN 'delivered' THEN NULL ELSE COALESCE(r.error, d.last_error) END,
              locked_until = NULL
         FROM r WHERE r.source = 'retry' AND d.event_id = r.id AND d.state = 'pending'),
     done AS (DELETE FROM dispatch_ranges WHERE id = ANY($10::uuid[]))
     SELECT 1`,
    [
      pick((r) => r.event.id),
      pick((r) => r.event.topic),
      pick((r) => r.event.orderingKey),
      pick((r) => r.event.seq),
      pick((r) => r.event.source),
      pick((r) => r.outcome),
      pick((r) => (r.outcome === 'retry' ? r.nextAttemptAt : null)),
      pick((r) => (r.outcome === 'retry' || r.outcome === 'dead' ? r.error.slice(0, 1000) : null)),
      pick((r) => r.event.expiresAt),
      completed,
    ],
  );
}

/** Renews a dispatcher's leases; a range missing from the answer was taken by another after it lapsed. */
export async function extendDispatchLeases(sql: Sql, rangeIds: string[], retryIds: string[], leaseMs: number): Promise<Map<string, Date>> {
  const kept = new Map<string, Date>();
  if (rangeIds.length) {
    const { rows } = await sql.query<{ id: string; leaseUntil: Date }>(
      `UPDATE dispatch_ranges SET lease_until = now() + $2 * interval '1 millisecond' WHERE id = ANY($1::uuid[]) RETURNING id, lease_until AS "leaseUntil"`,
      [rangeIds, leaseMs],
    );
    for (const row of rows) kept.set(row.id, row.leaseUntil);
  }
  if (retryIds.length) {
    await sql.query(
      `UPDATE dispatch_retries SET locked_until = now() + $2 * interval '1 millisecond'
        WHERE event_id = ANY($1::uuid[]) AND state = 'pending' AND locked_until IS NOT NULL`,
      [retryIds, leaseMs],
    );
  }
  return kept;
}

/** Gives back what a dispatcher will not post: its ranges and retries are free to take at once. */
export async function releaseDispatch(sql: Sql, rangeIds: string[], retries: { id: string; lease: Date }[]): Promise<number> {
  let released = 0;
  if (rangeIds.length) {
    const { rowCount } = await sql.query(`UPDATE dispatch_ranges SET lease_until = now() - interval '1 millisecond' WHERE id = ANY($1::uuid[])`, [rangeIds]);
    released += rowCount ?? 0;
  }
  if (retries.length) {
    const { rowCount } = await sql.query(
      `UPDATE dispatch_retries r SET locked_until = NULL FROM unnest($1::uuid[], $2::timestamptz[]) AS c(id, lease)
        WHERE r.event_id = c.id AND r.locked_until = c.lease AND r.state = 'pending'`,
      [retries.map((claim) => claim.id), retries.map((claim) => claim.lease)],
    );
    released += rowCount ?? 0;
  }
  return released;
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

/**
 * A dead letter's brand is its push's: one of an event with no push (a bonus or balance event) is
 * of no brand, seen only with every brand open.
 */
const OF_BRANDS = (event: string, param: string) =>
  `EXISTS (SELECT 1 FROM messages m WHERE m.id = ${event}.push_id AND m.accepted_on = uuid_v7_day(${event}.push_id) AND m.brand_id = ANY(${param}::bigint[]))`;

/** The dead letters, oldest first; of `brands` only (null: all). */
export async function listDeadLetters(sql: Sql, limit: number, brands: BrandSet = null): Promise<DeadLetter[]> {
  const { rows } = await sql.query<DeadLetter>(
    `SELECT r.event_id AS id, r.topic, e.push_id AS "pushId", e.status, r.attempts, r.last_error AS "lastError", e.occurred_at AS "occurredAt"
       FROM dispatch_retries r JOIN events e ON e.id = r.event_id
      WHERE r.state = 'dead'${brands === null ? '' : ` AND ${OF_BRANDS('e', '$2')}`} ORDER BY r.seq LIMIT $1`,
    brands === null ? [limit] : [limit, brands],
  );
  return rows;
}

/** Sends dead letters again (all, or the given ones; of `brands` only, null: all), with a fresh maximum age. */
export async function redriveDeadLetters(sql: Sql, maxAgeMs: number, ids?: string[], brands: BrandSet = null): Promise<number> {
  const { rowCount } = await sql.query(
    `UPDATE dispatch_retries r SET state = 'pending', attempts = 0, next_attempt_at = now(), locked_until = NULL,
            expires_at = now() + $1 * interval '1 millisecond'
      WHERE r.state = 'dead' AND ($2::uuid[] IS NULL OR r.event_id = ANY($2::uuid[]))${
        brands === null ? '' : ` AND EXISTS (SELECT 1 FROM events e WHERE e.id = r.event_id AND ${OF_BRANDS('e', '$3')})`
      }`,
    brands === null ? [maxAgeMs, ids ?? null] : [maxAgeMs, ids ?? null, brands],
  );
  return rowCount ?? 0;
}
