import {
  claimDueEvents,
  createPoller,
  createWriteBehind,
  extendEventClaims,
  releaseEventClaims,
  recordDispatch,
  PUSH_STATUS_TOPIC,
  type Db,
  type DispatchResult,
  type DueEvent,
} from '@operator/db';
import { statusWebhookBody, type StatusWebhookFormat } from './conversion';
import { answerReason, createOutbound, OutboundError, type OutboundAnswer, type ProxySettings } from '@operator/egress';
import { SIGNATURE_HEADER, signatureHeader } from './signature';
import { backoffMs, isRetriedStatus, parseRetryAfter, type LogSink } from '@operator/config';
import { countDispatch } from '@operator/metrics';

export interface WebhookAuth {
  basic?: { username: string; password: string };
  apiKey?: { header: string; value: string };
}

export interface DispatcherOptions {
  db: Db;
  log: LogSink;
  /** Where each topic's events go; a topic without a URL is not dispatched (polling only). */
  urls: Record<string, string | undefined>;
  /** Topics published to a message broker instead of POSTed (CRM_EVENTS_TRANSPORT=rabbitmq). */
  publishers?: Record<string, Publish>;
  secret: string;
  auth: WebhookAuth;
  /** The body of push status events; the event (the default) or the CRM's conversion, which posts only the engagements it counts. */
  statusFormat?: StatusWebhookFormat;
  /**
   * Status events posted together, as one JSON array of event bodies (the event format only); 1 (the
   * default): each event alone, as an object. The answer to the array is the answer for each event in it.
   */
  statusBatchMax?: number;
  timeoutMs: number;
  /** Posts in flight at once, over as many kept-alive connections. */
  concurrency: number;
  /** Events claimed from the outbox at once; more are claimed as soon as half of them are posted. */
  batchSize: number;
  /** How long a claimed event stays ours; a dispatcher killed mid-post leaves it to be taken again after this. */
  leaseMs: number;
  maxAgeMs: number;
  backoffMs: number;
  maxBackoffMs: number;
  /** Pause between polls when there is nothing to send. */
  idleMs: number;
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY. */
  proxy?: ProxySettings;
  /** Extra certificate authorities to trust (a local test server's). */
  ca?: string;
}

/**
 * Bytes of an answer read: enough for the CRM's JSON reason of a refusal, which is kept with the
 * dead letter as its status and a short sanitised reason; the rest is not read.
 */
const ANSWER_READ_BYTES = 4096;

export interface Dispatcher {
  /** One round: claim a batch of due events, post them, record the outcomes. Answers how many were claimed. */
  runOnce(): Promise<number>;
  /**
   * Posts continuously: `concurrency` posts in flight, claims refilled as they are taken, results
   * recorded as posts end.
   */
  start(): void;
  /** Stops claiming, gives back the claims not posted yet, and ends once the posts in flight are recorded. */
  stop(): Promise<void>;
  /** Gives back the claims on events claimed and not posted (shutdown past its deadline). */
  release(): Promise<number>;
}

interface Claim {
  /** The last moment a post of this claim may start. */
  lastStart: number;
  started: number;
}

/** What one attempt to deliver an event came to. */
export type PostOutcome = { ok: true } | { ok: false; retry: boolean; error: string; retryAfterMs: number };

/** Delivers an event some other way than a POST, within timeoutMs; its outcome is taken as a post's. */
export type Publish = (event: DueEvent, body: string) => Promise<PostOutcome>;

/**
 * Delivers outbox events to the CRM: JSON POSTs over kept-alive connections, signed, authenticated
 * as configured. Retries timeouts, network errors, 408, 425, 429 and 5xx with backoff until the
 * event's maximum age; other answers (a redirect too: never followed), with their status and the
 * reason their JSON gives, and events past their age, go to the dead letters. Events of one ordering key go in order: the claim takes only the first
 * pending event of each key. With statusBatchMax > 1, status events go out in arrays of up to that
 * many, one signed POST each, whose answer applies to every event in it.
 */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { db, log } = options;
  const posted = Object.entries(options.urls)
    .filter(([, url]) => url)
    .map(([topic]) => topic);
  const publishers = options.publishers ?? {};
  const topics = [...posted, ...Object.keys(publishers)];
  const baseHeaders: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'crm-operator-api/webhook' };
  if (options.auth.basic) {
    const { username, password } = options.auth.basic;
    baseHeaders.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  }
  if (options.auth.apiKey) baseHeaders[options.auth.apiKey.header.toLowerCase()] = options.auth.apiKey.value;
  // A connection per post in flight, kept open between posts: no handshake (TCP, TLS) per event.
  // Through the operator's proxy when one is set; a redirect is an answer (a refusal), never followed.
  const outbound = createOutbound({ proxy: options.proxy, ca: options.ca, connectionsPerOrigin: options.concurrency });
  const targets = new Map(posted.map((topic) => [topic, new URL(options.urls[topic]!)]));

  async function post(url: URL, body: string): Promise<PostOutcome> {
    let answer: OutboundAnswer;
    try {
      answer = await outbound.request({
        url,
        headers: { ...baseHeaders, [SIGNATURE_HEADER]: signatureHeader(options.secret, body) },
        body,
        timeoutMs: options.timeoutMs,
        maxBodyBytes: ANSWER_READ_BYTES,
      });
    } catch (error) {
      const reason = error instanceof OutboundError && error.failure === 'timeout' ? `timeout after ${options.timeoutMs} ms` : (error as Error).message;
      return { ok: false, retry: true, error: reason, retryAfterMs: 0 };
    }
    const { status } = answer;
    if (status >= 200 && status < 300) return { ok: true };
    const retryAfter = answer.headers['retry-after'];
    return { ok: false, retry: isRetriedStatus(status), error: answerReason(status, answer.body), retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter) ?? 0 };
  }

  const statusFormat = options.statusFormat ?? { format: 'event' };
  const statusBatchMax = options.statusBatchMax ?? 1;
  // The conversion endpoint takes one conversion per call.
  if (statusBatchMax > 1 && statusFormat.format !== 'event') throw new Error('statusBatchMax > 1 needs the event format');
  /** Whether the event goes out in an array with others of its topic. */
  const batched = (event: DueEvent) => statusBatchMax > 1 && event.topic === PUSH_STATUS_TOPIC && targets.has(event.topic);

  /** What to send for the event: undefined when it cannot be sent, null when its format posts nothing for it. */
  const bodyOf = (event: DueEvent): string | null | undefined => event.body ?? (event.push ? statusWebhookBody(statusFormat, event.push) : undefined);

  /** Posts (or publishes) the events, one alone or a batch as one array; one result per event. */
  async function dispatch(events: DueEvent[]): Promise<DispatchResult[]> {
    const results: DispatchResult[] = [];
    const sent: DueEvent[] = [];
    const bodies: string[] = [];
    for (const event of events) {
      const body = bodyOf(event);
      if (body === undefined) {
        results.push({ id: event.id, outcome: 'dead', error: 'event has no body and no push' });
        countDispatch(event.topic, 'dead');
      }
      // A status the format does not post (e.g. `sent` or `failed` as conversions) is done: the polling feed still has it.
      else if (body === null) results.push({ id: event.id, outcome: 'delivered' });
      else {
        sent.push(event);
        bodies.push(body);
      }
    }
    if (!sent.length) return results;
    const [first] = sent;
    const publish = publishers[first.topic];
    const outcome = await (publish
      ? publish(first, bodies[0])
      : post(targets.get(first.topic)!, batched(first) ? `[${bodies.join(',')}]` : bodies[0]));
    for (const event of sent) {
      const result = resultOf(event, outcome);
      countDispatch(event.topic, result.outcome);
      results.push(result);
    }
    return results;
  }

  function resultOf(event: DueEvent, outcome: PostOutcome): DispatchResult {
    if (outcome.ok) return { id: event.id, outcome: 'delivered' };
    const expiresAt = event.expiresAt?.getTime() ?? event.occurredAt.getTime() + options.maxAgeMs;
    const nextAt = Date.now() + backoffMs(event.attempts + 1, options.backoffMs, options.maxBackoffMs, outcome.retryAfterMs);
    if (!outcome.retry) return { id: event.id, outcome: 'dead', error: outcome.error };
    if (nextAt > expiresAt) return { id: event.id, outcome: 'dead', error: `${outcome.error}; gave up after the maximum age` };
    return { id: event.id, outcome: 'retry', nextAttemptAt: new Date(nextAt), error: outcome.error };
  }

  // Results are written as posts end, a few milliseconds' worth at a time; through a PostgreSQL
  // outage they are held and retried, never posted again because a write failed.
  const results = createWriteBehind<DispatchResult>({ what: 'webhook results', log, write: (items) => recordDispatch(db.pool, items) });

  /** Claimed and not started, oldest first, each with its claim. */
  const waiting: { event: DueEvent; claim: Claim }[] = [];
  /** Posted, result not recorded yet: their claims are renewed until it is. */
  const held = new Set<string>();
  let renewing: NodeJS.Timeout | undefined;
  let renewers = 0;
  function renew(on: boolean) {
    renewers += on ? 1 : -1;
    if (renewers === 1 && !renewing) {
      renewing = setInterval(() => void extendEventClaims(db.pool, [...held], options.leaseMs).catch(() => undefined), Math.max(100, options.leaseMs / 3));
    } else if (renewers === 0) {
      clearInterval(renewing);
      renewing = undefined;
    }
  }

  async function claimMore(limit: number): Promise<number> {
    // A post may start only if it ends (timeoutMs), and is recorded, while the claim is still ours:
    // past the lease another dispatcher takes the event and sends it too. Events not started by
    // then are given back, for a later claim (ours or another's).
    // (The first posts of a claim start as soon as it is taken, whatever the timeout.)
    const claim: Claim = { lastStart: Date.now() + options.leaseMs - options.timeoutMs - options.leaseMs / 10, started: 0 };
    const events = await claimDueEvents(db.pool, topics, limit, options.leaseMs);
    for (const event of events) waiting.push({ event, claim });
    if (events.length) wakeWorkers();
    return events.length;
  }

  function giveBack(events: DueEvent[]): Promise<number> {
    return releaseEventClaims(
      db.pool,
      events.map((event) => ({ id: event.id, lease: event.lease })),
    );
  }

  /** Whether a post of this claim may still start (its first `concurrency` posts always may). */
  const mayStart = (claim: Claim) => claim.started < options.concurrency || Date.now() <= claim.lastStart;

  /**
   * The next claimed events to post together that may still start: one, or up to statusBatchMax
   * batched status events, oldest first. Those too late for their claim are given back. The claim
   * holds at most one event per ordering key, so the events of a batch need no order among them.
   */
  function take(): DueEvent[] {
    const late: DueEvent[] = [];
    const next: DueEvent[] = [];
    const claims = new Set<Claim>();
    while (!next.length && waiting.length) {
      const { event, claim } = waiting.shift()!;
      if (mayStart(claim)) {
        next.push(event);
        claims.add(claim);
      } else late.push(event);
    }
    if (next.length && batched(next[0])) {
      const skipped: typeof waiting = [];
      let i = 0;
      for (; i < waiting.length && next.length < statusBatchMax; i += 1) {
        const { event, claim } = waiting[i];
        if (event.topic !== next[0].topic) skipped.push(waiting[i]);
        else if (mayStart(claim)) {
          next.push(event);
          claims.add(claim);
        } else late.push(event);
      }
      waiting.splice(0, i, ...skipped);
    }
    // A post counts once for each claim it holds events of.
    for (const claim of claims) claim.started += 1;
    if (late.length) void giveBack(late).catch(() => undefined);
    if (waiting.length <= options.batchSize / 2) wakeClaimer();
    return next;
  }

  /** Posts the events and hands their results to the writer; resolves once the post ended. */
  async function postEvents(events: DueEvent[], recorded: Set<Promise<void>>): Promise<void> {
    for (const event of events) held.add(event.id);
    const outcomes = await dispatch(events);
    for (const result of outcomes) {
      if (result.outcome === 'dead') log.warn({ event: result.id, topic: events[0].topic, error: result.error }, 'event moved to the dead letters');
    }
    const written: Promise<void> = results.add(outcomes).finally(() => {
      for (const event of events) held.delete(event.id);
      recorded.delete(written);
    });
    recorded.add(written);
    // Whoever waits for it sees a failure; the write-behind has logged it already.
    written.catch(() => undefined);
  }

  async function runOnce(): Promise<number> {
    renew(true);
    try {
      const claimed = await claimMore(options.batchSize);
      const recorded = new Set<Promise<void>>();
      await Promise.all(
        Array.from({ length: Math.min(options.concurrency, claimed) }, async () => {
          for (let events = take(); events.length; events = take()) await postEvents(events, recorded);
        }),
      );
      await Promise.all(recorded);
      return claimed;
    } finally {
      renew(false);
    }
  }

  // The continuous pipeline: workers post whatever is claimed; the claimer tops the claims up to
  // batchSize whenever half of them are taken, without waiting for the posts in flight.
  let running = false;
  let workers: Promise<void> | undefined;
  let idle: (() => void)[] = [];
  let roomFor: (() => void) | undefined;
  const recordedByPipeline = new Set<Promise<void>>();
  function wakeWorkers() {
    for (const wake of idle.splice(0)) wake();
  }
  function wakeClaimer() {
    roomFor?.();
    roomFor = undefined;
  }

  const claimer = createPoller({
    what: 'dispatch',
    log,
    idleMs: options.idleMs,
    round: async () => {
      if (waiting.length > options.batchSize / 2) await new Promise<void>((resolve) => (roomFor = resolve));
      if (!running) return false;
      const wanted = options.batchSize - waiting.length;
      return (await claimMore(wanted)) >= wanted;
    },
  });

  async function work(): Promise<void> {
    while (running) {
      const events = take();
      if (events.length) await postEvents(events, recordedByPipeline).catch(() => undefined);
      else await new Promise<void>((resolve) => idle.push(resolve));
    }
  }

  return {
    runOnce,
    start() {
      if (running) return;
      running = true;
      renew(true);
      claimer.start();
      workers = Promise.all(Array.from({ length: options.concurrency }, work)).then(() => undefined);
    },
    async stop() {
      if (!running) return;
      running = false;
      wakeClaimer();
      wakeWorkers();
      await claimer.stop();
      await workers;
      await giveBack(waiting.splice(0).map((item) => item.event)).catch(() => undefined);
      await Promise.allSettled([...recordedByPipeline]);
      renew(false);
      await outbound.close();
    },
    release() {
      return giveBack(waiting.splice(0).map((item) => item.event));
    },
  };
}
