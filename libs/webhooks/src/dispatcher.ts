import {
  claimDueEvents,
  createPoller,
  createWriteBehind,
  extendEventClaims,
  pushEventRows,
  releaseEventClaims,
  recordDispatch,
  sequenceFeed,
  type Db,
  type DispatchResult,
  type DueEvent,
} from '@operator/db';
import { pushEventBody } from './body';
import { SIGNATURE_HEADER, signatureHeader } from './signature';
import { backoffMs, type LogSink } from '@operator/config';


export interface WebhookAuth {
  basic?: { username: string; password: string };
  apiKey?: { header: string; value: string };
}

export interface DispatcherOptions {
  db: Db;
  log: LogSink;
  /** Where each topic's events go; a topic without a URL is not dispatched (polling only). */
  urls: Record<string, string | undefined>;
  secret: string;
  auth: WebhookAuth;
  timeoutMs: number;
  concurrency: number;
  batchSize: number;
  /** How long a claimed event stays ours; a dispatcher killed mid-post leaves it to be taken again after this. */
  leaseMs: number;
  maxAgeMs: number;
  backoffMs: number;
  maxBackoffMs: number;
  /** Pause between polls when there is nothing to send. */
  idleMs: number;
}

const RETRIED_STATUSES = new Set([408, 425, 429]);

export function isRetried(status: number): boolean {
  return status >= 500 || RETRIED_STATUSES.has(status);
}

function retryAfterMs(header: string | null): number {
  if (!header) return 0;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? 0 : Math.max(0, date - Date.now());
}

export interface Dispatcher {
  /** One round: claim due events, post them, record the outcomes. Answers how many were claimed. */
  runOnce(): Promise<number>;
  /** Runs rounds until stop(). */
  start(): void;
  /** Finishes the round in flight, then stops. */
  stop(): Promise<void>;
  /** Gives back the claims on events claimed and not posted (shutdown past its deadline). */
  release(): Promise<number>;
}

/**
 * Delivers outbox events to the CRM: JSON POSTs, signed, authenticated as configured. Retries
 * timeouts, network errors, 408, 425, 429 and 5xx with backoff until the event's maximum age;
 * other answers, and events past their age, go to the dead letters. Events of one push go in order.
 */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { db, log } = options;
  const topics = Object.entries(options.urls)
    .filter(([, url]) => url)
    .map(([topic]) => topic);
  const baseHeaders: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'crm-operator-api/webhook' };
  if (options.auth.basic) {
    const { username, password } = options.auth.basic;
    baseHeaders.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  }
  if (options.auth.apiKey) baseHeaders[options.auth.apiKey.header.toLowerCase()] = options.auth.apiKey.value;

  async function post(url: string, body: string): Promise<{ ok: true } | { ok: false; retry: boolean; error: string; retryAfterMs: number }> {
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { ...baseHeaders, [SIGNATURE_HEADER]: signatureHeader(options.secret, body) },
        body,
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (response.ok) return { ok: true };
      return {
        ok: false,
        retry: isRetried(response.status),
        error: `HTTP ${response.status}`,
        retryAfterMs: retryAfterMs(response.headers.get('retry-after')),
      };
    } catch (error) {
      const reason = (error as Error).name === 'TimeoutError' ? `timeout after ${options.timeoutMs} ms` : ((error as Error).cause as Error)?.message ?? (error as Error).message;
      return { ok: false, retry: true, error: reason, retryAfterMs: 0 };
    }
  }

  async function dispatch(event: DueEvent, body: string): Promise<DispatchResult> {
    const outcome = await post(options.urls[event.topic]!, body);
    if (outcome.ok) return { id: event.id, outcome: 'delivered' };
    const expiresAt = event.expiresAt?.getTime() ?? event.occurredAt.getTime() + options.maxAgeMs;
    const nextAt = Date.now() + backoffMs(event.attempts + 1, options.backoffMs, options.maxBackoffMs, outcome.retryAfterMs);
    if (!outcome.retry) return { id: event.id, outcome: 'dead', error: outcome.error };
    if (nextAt > expiresAt) return { id: event.id, outcome: 'dead', error: `${outcome.error}; gave up after the maximum age` };
    return { id: event.id, outcome: 'retry', nextAttemptAt: new Date(nextAt), error: outcome.error };
  }

  /** Events claimed by a round in flight and not posted yet. */
  const unposted = new Set<string>();
  // Results are written as posts finish, a few milliseconds' worth at a time; through a PostgreSQL
  // outage they are held and retried, never posted again because a write failed.
  const results = createWriteBehind<DispatchResult>({ what: 'webhook results', log, write: (items) => recordDispatch(db.pool, items) });

  async function runOnce(): Promise<number> {
    await sequenceFeed(db);
    // A post may start only if it ends (timeoutMs), and is recorded, while the claim is still ours:
    // past the lease another dispatcher takes the event and sends it too. Events not started by then
    // stay claimed until the lease lapses, then go out in a later round (ours or another's).
    const lastStart = Date.now() + options.leaseMs - options.timeoutMs - options.leaseMs / 10;
    const events = await claimDueEvents(db.pool, topics, options.batchSize, options.leaseMs);
    if (!events.length) return 0;
    // From its post until its result is in PostgreSQL (through an outage too), an event's claim is
    // renewed: no other dispatcher posts it again. Events not started lapse as they are.
    const posted: string[] = [];
    for (const event of events) unposted.add(event.id);
    const renew = setInterval(() => void extendEventClaims(db.pool, posted, options.leaseMs).catch(() => undefined), Math.max(100, options.leaseMs / 3));
    try {
      return await postAll(events, lastStart, posted);
    } finally {
      clearInterval(renew);
      for (const event of events) unposted.delete(event.id);
    }
  }

  /** Posts the claimed events, at most `concurrency` at a time; answers once every result is recorded. */
  async function postAll(events: DueEvent[], lastStart: number, posted: string[]): Promise<number> {
    const pushRows = new Map((await pushEventRows(db.pool, events.filter((e) => e.pushId).map((e) => e.id))).map((row) => [row.id, row]));
    const recorded: Promise<void>[] = [];
    const dead: string[] = [];
    const keep = (result: DispatchResult) => {
      if (result.outcome === 'dead') dead.push(result.id);
      recorded.push(results.add([result]));
    };
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(options.concurrency, events.length) }, async () => {
        while (next < events.length) {
          if (next >= options.concurrency && Date.now() > lastStart) break;
          const event = events[next++];
          posted.push(event.id);
          unposted.delete(event.id);
          const body = event.body ?? (pushRows.has(event.id) ? pushEventBody(pushRows.get(event.id)!) : undefined);
          if (body === undefined) {
            keep({ id: event.id, outcome: 'dead', error: 'event has no body and no push' });
            continue;
          }
          keep(await dispatch(event, body));
        }
      }),
    );
    await Promise.all(recorded);
    if (dead.length) log.warn({ events: dead }, 'events moved to the dead letters');
    return events.length;
  }

  const poller = createPoller({ what: 'dispatch', log, idleMs: options.idleMs, round: async () => (await runOnce()) >= options.batchSize });

  return {
    runOnce,
    start: poller.start,
    stop: poller.stop,
    release() {
      return releaseEventClaims(db.pool, [...unposted]);
    },
  };
}
