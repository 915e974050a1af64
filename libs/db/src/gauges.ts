import { inTransaction, type Db } from './client';
import { settledPosition } from './outbox';

// What the metrics read of the outbox and the credits when scraped. Each reading is one statement,
// bounded by its own statement_timeout (far below the pool's), on indexes that hold only what is
// counted: the tables themselves grow with the traffic, these readings do not.

async function boundedQuery<R extends object>(db: Db, timeoutMs: number, text: string, values: unknown[] = []): Promise<R[]> {
  return inTransaction(db, async (sql) => {
    await sql.query(`SELECT set_config('statement_timeout', $1, true)`, [String(Math.max(1, Math.round(timeoutMs)))]);
    return (await sql.query<R>(text, values)).rows;
  });
}

export interface OutboxTopicBacklog {
  topic: string;
  pending: number;
  /** Age of the oldest pending event; 0 when none is pending. */
  oldestSeconds: number;
}

/**
 * The events of each topic waiting to be delivered, and the age of the oldest: those past the
 * topic's settled dispatch position (read from (topic, feed_seq): the events already through are
 * never read) and the pending retries (from their partial index).
 */
export async function readOutboxBacklog(db: Db, topics: string[], timeoutMs: number): Promise<OutboxTopicBacklog[]> {
  const rows = await boundedQuery<{ topic: string; pending: string; oldestSeconds: number | null }>(
    db,
    timeoutMs,
    `SELECT t.topic,
            (SELECT count(*) FROM events e WHERE e.topic = t.topic AND e.feed_seq > s.position
                AND NOT EXISTS (SELECT 1 FROM dispatch_retries x WHERE x.event_id = e.id))
              + (SELECT count(*) FROM dispatch_retries r WHERE r.topic = t.topic AND r.state = 'pending') AS pending,
            extract(epoch FROM now() - LEAST(
              (SELECT e.occurred_at FROM events e WHERE e.topic = t.topic AND e.feed_seq > s.position ORDER BY e.feed_seq LIMIT 1),
              (SELECT e.occurred_at FROM dispatch_retries r JOIN events e ON e.id = r.event_id
                WHERE r.topic = t.topic AND r.state = 'pending' ORDER BY r.seq LIMIT 1)))::float8 AS "oldestSeconds"
       FROM unnest($1::text[]) AS t(topic)
       CROSS JOIN LATERAL (SELECT ${settledPosition('t.topic')} AS position) s`,
    [topics],
  );
  return rows.map((row) => ({ topic: row.topic, pending: Number(row.pending), oldestSeconds: Math.max(0, row.oldestSeconds ?? 0) }));
}

/** Events in the dead letters, from their partial index. */
export async function countDeadLetters(db: Db, timeoutMs: number): Promise<number> {
  const [row] = await boundedQuery<{ count: string }>(db, timeoutMs, `SELECT count(*) FROM dispatch_retries WHERE state = 'dead'`);
  return Number(row.count);
}

/** Credits in each state, every state named (0 when none is in it), from the (status, next_attempt_at) index. */
export interface CreditCount {
  state: string;
  brand: string;
  count: number;
}

/** Credits by brand and state, every state of a brand that has any (0 when none is in it). */
export async function countCreditsByState(db: Db, timeoutMs: number): Promise<CreditCount[]> {
  const rows = await boundedQuery<{ state: string; brand: string; count: string }>(
    db,
    timeoutMs,
    `WITH c AS (SELECT brand_id, status, count(*) AS count FROM credits GROUP BY 1, 2)
     SELECT s.state::text AS state, b.brand_id::text AS brand, COALESCE(c.count, 0) AS count
       FROM (SELECT DISTINCT brand_id FROM c) b
            CROSS JOIN unnest(enum_range(NULL::"CreditStatus")) AS s(state)
            LEFT JOIN c ON c.brand_id = b.brand_id AND c.status = s.state`,
  );
  return rows.map((row) => ({ state: row.state, brand: row.brand, count: Number(row.count) }));
}
