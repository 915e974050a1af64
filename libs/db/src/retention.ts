import type { LogSink } from '@operator/config';
import type pg from 'pg';
import type { Db, Sql } from './client';
import { PUSH_STATUS_TOPIC } from './feed';
import { settledPosition } from './outbox';
import { addDays, dayOf, listPartitions, partitionName, type PartitionedTable } from './partitions';
import { createPoller, type Poller } from './poller';

// Retention: what is settled and older than the retention goes, so the tables stop growing. A day's
// partitions are dropped whole once nothing in them is left to do (a message being sent, an event
// to post); rows of the default partitions go in small batches. Financial records (credits, ledger
// entries, accounts, player bonuses) are never purged; devices and the catalog are not history.

export interface PurgeOptions {
  /** Rows older than this many days go; 0 keeps everything for ever. */
  retentionDays: number;
  /** Rows per statement (default partitions). */
  batchSize?: number;
  /**
   * Push statuses are read from the polling feed only (no CRM_STATUS_WEBHOOK_URL): nothing will
   * ever post them, so their events age out while still pending instead of holding their messages.
   */
  feedOnly?: boolean;
  /** Now, for tests. */
  now?: number;
  /** Longest wait for the locks of a partition's drop before it is left to the next look. */
  lockTimeoutMs?: number;
}

export interface Purged {
  events: number;
  messages: number;
  /** Day partitions dropped. */
  partitions: string[];
  /** Days past the retention kept a while longer, with why. */
  busy: { day: string; reason: string }[];
}

/** Whether event `e` went through: its topic's dispatch is settled past it and it waits for no retry. */
const THROUGH = (e: string) =>
  `(${e}.feed_seq <= ${settledPosition(`${e}.topic`)}
    AND NOT EXISTS (SELECT 1 FROM dispatch_retries x WHERE x.event_id = ${e}.id AND x.state = 'pending'))`;

const TOPICS = [PUSH_STATUS_TOPIC, 'bonus', 'balance'];

/**
 * One batch of each kind, from the default partitions: messages settled, closed and unchanged for
 * the retention, with no pending delivery nor status event to post, go with their deliveries,
 * events and dead letters; events through (posted, or dead letters kept for the retention) go with
 * their dead letters. An event to post is kept whatever its age, unless `feedOnly`.
 */
export async function purgeDefaultPartitions(sql: Sql, { retentionDays, batchSize = 1000, feedOnly = false }: PurgeOptions): Promise<{ events: number; messages: number }> {
  if (!(retentionDays > 0)) return { events: 0, messages: 0 };
  const { rows } = await sql.query<{ messages: number; events: number }>(
    `WITH doomed AS (
       SELECT m.id FROM messages_default m
        WHERE m.created_at < now() - $1 * interval '1 day' AND m.updated_at < now() - $1 * interval '1 day'
          AND m.status <> 'accepted' AND m.open IS NOT TRUE
          AND NOT EXISTS (SELECT 1 FROM deliveries_default d WHERE d.message_id = m.id AND d.status = 'pending')
          ${feedOnly ? '' : `AND NOT EXISTS (SELECT 1 FROM events e WHERE e.ordering_key = m.id::text AND NOT ${THROUGH('e')})`}
        ORDER BY m.created_at LIMIT $2 FOR UPDATE OF m SKIP LOCKED),
     events_gone AS (DELETE FROM events e USING doomed WHERE e.ordering_key = doomed.id::text AND e.push_id = doomed.id RETURNING e.id),
     letters_gone AS (DELETE FROM dispatch_retries x USING events_gone g WHERE x.event_id = g.id),
     deliveries_gone AS (DELETE FROM deliveries_default d USING doomed WHERE d.message_id = doomed.id),
     messages_gone AS (DELETE FROM messages_default m USING doomed WHERE m.id = doomed.id RETURNING 1)
     SELECT (SELECT count(*) FROM messages_gone)::int AS messages, (SELECT count(*) FROM events_gone)::int AS events`,
    [retentionDays, batchSize],
  );
  // Other events, oldest first: through, or push statuses nobody will post.
  const { rows: events } = await sql.query<{ count: number }>(
    `WITH gone AS (
       DELETE FROM events_default WHERE id IN (
         SELECT e.id FROM events_default e
          WHERE e.occurred_at < now() - $1 * interval '1 day' AND (${THROUGH('e')} OR ($3 AND e.topic = $4))
          ORDER BY e.occurred_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id),
     letters_gone AS (DELETE FROM dispatch_retries x USING gone g WHERE x.event_id = g.id)
     SELECT count(*)::int AS count FROM gone`,
    [retentionDays, batchSize, feedOnly, PUSH_STATUS_TOPIC],
  );
  return { events: rows[0].events + events[0].count, messages: rows[0].messages };
}

/**
 * Why a day's messages cannot go yet (SQL answering one row per reason found), for day $1: its
 * deliveries are looked for in `deliveries`, the day's partition or, once that is gone (or was
 * never made), the default partition.
 */
const MESSAGES_DAY_BUSY = (messages: string, deliveries: string, feedOnly: boolean) => `
  SELECT 'a message still to be sent' AS reason FROM (SELECT 1 FROM "${messages}" WHERE status = 'accepted' OR open LIMIT 1) a
  UNION ALL
  SELECT 'a delivery still open' FROM (SELECT 1 FROM "${deliveries}" WHERE open AND accepted_on = $1::date LIMIT 1) b
  ${
    feedOnly
      ? ''
      : `UNION ALL
  SELECT 'a status event still to be posted' FROM (
    SELECT 1 FROM events e
     WHERE e.topic = '${PUSH_STATUS_TOPIC}' AND e.feed_seq > ${settledPosition(`'${PUSH_STATUS_TOPIC}'`)} AND uuid_v7_day(e.push_id) = $1::date
    UNION ALL
    SELECT 1 FROM dispatch_retries x JOIN events e ON e.id = x.event_id
     WHERE x.state = 'pending' AND x.topic = '${PUSH_STATUS_TOPIC}' AND uuid_v7_day(e.push_id) = $1::date
    LIMIT 1) c`
  }`;

/** A delivery of the day's partition still open. */
const DELIVERIES_OPEN = (deliveries: string) => `SELECT 'a delivery still open' AS reason FROM "${deliveries}" WHERE open LIMIT 1`;

/** Why a day's events cannot go yet. */
const EVENTS_DAY_BUSY = (events: string, feedOnly: boolean) => {
  const topics = TOPICS.filter((topic) => !(feedOnly && topic === PUSH_STATUS_TOPIC));
  return `
  SELECT 'an event still to be posted' AS reason FROM (
    SELECT 1 FROM unnest(ARRAY[${topics.map((topic) => `'${topic}'`).join(', ')}]::text[]) AS t(topic)
     CROSS JOIN LATERAL (SELECT 1 FROM "${events}" e WHERE e.topic = t.topic AND e.feed_seq > ${settledPosition('t.topic')} LIMIT 1) x
    UNION ALL
    SELECT 1 FROM dispatch_retries x JOIN "${events}" e ON e.id = x.event_id
     WHERE x.state = 'pending' ${feedOnly ? `AND x.topic <> '${PUSH_STATUS_TOPIC}'` : ''}
    LIMIT 1) a`;
};

/**
 * Drops the day partitions past the retention with nothing left to do: a day's messages and
 * deliveries once none is being sent and (unless `feedOnly`) no status event of them waits to be
 * posted; a day's events once all went through (dead letters go with them). A day is looked at
 * without a lock first, then each partition is dropped in a transaction of its own that locks its
 * parent, then it (at most `lockTimeoutMs`), and checks again. One parent a transaction, parent
 * first, as every query locks: a day's deliveries go, then its messages.
 */
export async function dropExpiredPartitions(
  pool: pg.Pool,
  { retentionDays, feedOnly = false, now = Date.now(), lockTimeoutMs = 1000 }: PurgeOptions,
): Promise<{ dropped: string[]; busy: { day: string; reason: string }[] }> {
  const dropped: string[] = [];
  const busy: { day: string; reason: string }[] = [];
  if (!(retentionDays > 0)) return { dropped, busy };
  // A day goes when all of it is older than the retention: its end is at most now - retentionDays.
  const lastDay = addDays(dayOf(now), -retentionDays - 1);
  const partitions = (await listPartitions(pool)).filter((p) => p.day !== undefined && p.day <= lastDay);
  const days = [...new Set(partitions.map((p) => p.day!))].sort();
  for (const day of days) {
    const names = new Set(partitions.filter((p) => p.day === day).map((p) => p.name));
    // `busy` is looked at without a lock; `recheck`, under the parent's exclusive lock, is what can
    // change in between and is cheap to read (an open delivery, an event not through).
    const steps: { parent: PartitionedTable; table: string; busy: string; recheck: string | null }[] = [];
    const messages = partitionName('messages', day);
    const deliveries = partitionName('deliveries', day);
    if (names.has(messages)) {
      if (names.has(deliveries)) {
        steps.push({ parent: 'deliveries', table: deliveries, busy: MESSAGES_DAY_BUSY(messages, deliveries, feedOnly), recheck: DELIVERIES_OPEN(deliveries) });
      }
      steps.push({ parent: 'messages', table: messages, busy: MESSAGES_DAY_BUSY(messages, 'deliveries_default', feedOnly), recheck: null });
    }
    const events = partitionName('events', day);
    if (names.has(events)) {
      const check = EVENTS_DAY_BUSY(events, feedOnly);
      steps.push({ parent: 'events', table: events, busy: check, recheck: check });
    }
    for (const step of steps) {
      // A day's messages go only once its deliveries went.
      if (step.table === messages && names.has(deliveries) && !dropped.includes(deliveries)) continue;
      const params = step.busy.includes('$1') ? [day] : [];
      const { rows: seen } = await pool.query<{ reason: string }>(step.busy, params);
      if (seen.length) {
        busy.push({ day, reason: seen[0].reason });
        continue;
      }
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`);
        await client.query("SELECT pg_advisory_xact_lock(hashtext('operator-api retention'))");
        await client.query(`LOCK TABLE ONLY "${step.parent}", "${step.table}" IN ACCESS EXCLUSIVE MODE`);
        const { rows } = step.recheck
          ? await client.query<{ reason: string }>(step.recheck, step.recheck.includes('$1') ? [day] : [])
          : { rows: [] };
        if (rows.length) {
          busy.push({ day, reason: rows[0].reason });
          await client.query('ROLLBACK');
          continue;
        }
        if (step.table === events) await client.query(`DELETE FROM dispatch_retries x USING "${events}" e WHERE x.event_id = e.id`);
        await client.query(`DROP TABLE "${step.table}"`);
        await client.query('COMMIT');
        dropped.push(step.table);
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        if ((error as { code?: string }).code !== '55P03') throw error;
        busy.push({ day, reason: 'lock not granted in time' });
      } finally {
        client.release();
      }
    }
  }
  return { dropped, busy };
}

/** One look: the expired day partitions dropped, then a batch of the default partitions' old rows. */
export async function purgeOnce(pool: pg.Pool, options: PurgeOptions): Promise<Purged> {
  const { dropped, busy } = await dropExpiredPartitions(pool, options);
  const rows = await purgeDefaultPartitions(pool, options);
  return { ...rows, partitions: dropped, busy };
}

export interface RetentionOptions extends PurgeOptions {
  db: Db;
  log: LogSink;
  /** Pause between looks once nothing is left to purge. */
  intervalMs: number;
}

/**
 * Purges in the background: expired day partitions, then the default partitions' rows batch after
 * batch, resting after each as long as it took (a backlog takes at most half a connection), then
 * once every `intervalMs`. With `retentionDays` 0 it does nothing.
 */
export function startRetention({ db, log, intervalMs, ...options }: RetentionOptions): Poller {
  if (!(options.retentionDays > 0)) {
    log.info({}, 'retention is off (RETENTION_DAYS=0): messages and events are kept for ever');
    return { start() {}, stop: async () => undefined };
  }
  const total = { events: 0, messages: 0 };
  /** Days said to be held, so that each is said once. */
  const said = new Set<string>();
  const poller = createPoller({
    what: 'retention',
    log,
    idleMs: intervalMs,
    round: async () => {
      const started = Date.now();
      const purged = await purgeOnce(db.pool, options);
      if (purged.partitions.length) log.info({ dropped: purged.partitions, retentionDays: options.retentionDays }, 'retention dropped day partitions');
      for (const { day, reason } of purged.busy) {
        if (said.has(day)) continue;
        said.add(day);
        log.info({ day, reason }, 'a day past the retention is kept a while longer');
      }
      if (purged.events || purged.messages) {
        total.events += purged.events;
        total.messages += purged.messages;
        await new Promise((resolve) => setTimeout(resolve, Date.now() - started));
        return true;
      }
      if (total.events || total.messages) {
        log.info({ ...total, retentionDays: options.retentionDays }, 'retention purged old messages and events');
        total.events = total.messages = 0;
      }
      return false;
    },
  });
  poller.start();
  return poller;
}
