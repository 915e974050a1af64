import type { LogSink } from '@operator/config';
import type { Db, Sql } from './client';
import { PUSH_STATUS_TOPIC } from './feed';
import { settledPosition } from './outbox';
import { createPoller, type Poller } from './poller';

// Retention: what is settled and older than the retention goes, a small batch per statement (each
// its own short transaction, rows locked by someone else skipped), so the tables stop growing and
// the hot paths keep their speed. Credits, ledger entries, accounts and player bonuses are financial
// records and are never purged; devices and the bonus catalog are not history.

export interface PurgeOptions {
  /** Rows older than this many days go; 0 keeps everything for ever. */
  retentionDays: number;
  /** Rows per statement. */
  batchSize?: number;
  /**
   * Push statuses are read from the polling feed only (no CRM_STATUS_WEBHOOK_URL): nothing will
   * ever post them, so their events age out while still pending instead of holding their messages.
   */
  feedOnly?: boolean;
}

export interface Purged {
  events: number;
  messages: number;
}

/** Whether event `e` went through: its topic's dispatch is settled past it and it waits for no retry. */
const THROUGH = (e: string) =>
  `(${e}.feed_seq <= ${settledPosition(`${e}.topic`)}
    AND NOT EXISTS (SELECT 1 FROM dispatch_retries x WHERE x.event_id = ${e}.id AND x.state = 'pending'))`;

/**
 * One batch of each kind:
 * - messages settled (not `accepted`), created and last changed before the retention, with no
 *   delivery still `pending` or `sending` and no status event still to be posted: deleted with
 *   their deliveries (the foreign key cascades), their status events and those events' dead letters;
 * - events through (posted, or dead letters: the dead letters stay for the retention, the time there
 *   is to redrive them) that occurred before the retention, whatever their topic, with their dead letters.
 * An event still to be posted is kept whatever its age (a redriven dead letter keeps its old
 * occurred_at), unless `feedOnly` says nobody will post push statuses.
 */
export async function purgeOnce(sql: Sql, { retentionDays, batchSize = 1000, feedOnly = false }: PurgeOptions): Promise<Purged> {
  if (!(retentionDays > 0)) return { events: 0, messages: 0 };
  const { rows } = await sql.query<{ messages: number; events: number }>(
    `WITH doomed AS (
       SELECT m.id FROM messages m
        WHERE m.created_at < now() - $1 * interval '1 day' AND m.updated_at < now() - $1 * interval '1 day'
          AND m.status <> 'accepted'
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id AND d.status IN ('pending', 'sending'))
          ${feedOnly ? '' : `AND NOT EXISTS (SELECT 1 FROM events e WHERE e.ordering_key = m.id::text AND NOT ${THROUGH('e')})`}
        ORDER BY m.created_at LIMIT $2 FOR UPDATE OF m SKIP LOCKED),
     events_gone AS (DELETE FROM events e USING doomed WHERE e.ordering_key = doomed.id::text AND e.push_id = doomed.id RETURNING e.id),
     letters_gone AS (DELETE FROM dispatch_retries x USING events_gone g WHERE x.event_id = g.id),
     messages_gone AS (DELETE FROM messages m USING doomed WHERE m.id = doomed.id RETURNING 1)
     SELECT (SELECT count(*) FROM messages_gone)::int AS messages, (SELECT count(*) FROM events_gone)::int AS events`,
    [retentionDays, batchSize],
  );
  // Other events, oldest first: through, or push statuses nobody will post.
  const { rows: events } = await sql.query<{ count: number }>(
    `WITH gone AS (
       DELETE FROM events WHERE id IN (
         SELECT e.id FROM events e
          WHERE e.occurred_at < now() - $1 * interval '1 day' AND (${THROUGH('e')} OR ($3 AND e.topic = $4))
          ORDER BY e.occurred_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING id),
     letters_gone AS (DELETE FROM dispatch_retries x USING gone g WHERE x.event_id = g.id)
     SELECT count(*)::int AS count FROM gone`,
    [retentionDays, batchSize, feedOnly, PUSH_STATUS_TOPIC],
  );
  return { events: rows[0].events + events[0].count, messages: rows[0].messages };
}

export interface RetentionOptions extends PurgeOptions {
  db: Db;
  log: LogSink;
  /** Pause between looks once nothing is left to purge. */
  intervalMs: number;
}

/**
 * Purges in the background: batch after batch while there is a backlog, resting after each as long
 * as it took (so a backlog of millions of rows takes at most half of one connection's time), then
 * once every `intervalMs`. Stop it on shutdown (it finishes the batch in flight). With
 * `retentionDays` 0 it does nothing.
 */
export function startRetention({ db, log, intervalMs, ...options }: RetentionOptions): Poller {
  if (!(options.retentionDays > 0)) {
    log.info({}, 'retention is off (RETENTION_DAYS=0): messages and events are kept for ever');
    return { start() {}, stop: async () => undefined };
  }
  const total: Purged = { events: 0, messages: 0 };
  const poller = createPoller({
    what: 'retention',
    log,
    idleMs: intervalMs,
    round: async () => {
      const started = Date.now();
      const purged = await purgeOnce(db.pool, options);
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
