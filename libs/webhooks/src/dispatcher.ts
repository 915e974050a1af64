import {
  claimRetries,
  createPoller,
  createWriteBehind,
  extendDispatchLeases,
  openEventWindow,
  rangeEvents,
  recordDispatch,
  releaseDispatch,
  takeRange,
  PUSH_STATUS_TOPIC,
  type Db,
  type DispatchRange,
  type DispatchResult,
  type DueEvent,
  type EventWindow,
} from '@operator/db';
import { statusWebhookBody, type StatusWebhookFormat } from './conversion';
import { answerReason, createOutbound, OutboundError, type OutboundAnswer, type ProxySettings } from '@operator/egress';
import { SIGNATURE_HEADER, signatureHeader } from './signature';
import { backoffMs, isRetriedStatus, parseRetryAfter, type LogSink } from '@operator/config';
import { countDispatch } from '@operator/metrics';

/** How long an event window is used before it is opened again (it holds for a day). */
const EVENT_WINDOW_MS = 5000;

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

/** What a dispatcher holds events by: a range of a topic's first tries, or one claimed retry. */
type Claim =
  | { kind: 'range'; range: DispatchRange; lastStart: number; started: number; open: number; lost: boolean }
  | { kind: 'retry'; lease: Date; lastStart: number; started: number };

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
        results.push({ event, outcome: 'dead', error: 'event has no body and no push' });
        countDispatch(event.topic, 'dead');
      }
      // A status the format does not post (e.g. `sent` or `failed` as conversions) is done: the polling feed still has it.
      else if (body === null) results.push({ event, outcome: 'delivered' });
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

  function resultOf(event: DueEvent, outcome: PostOutcome): DispatchResult & { outcome: 'delivered' | 'retry' | 'dead' } {
    if (outcome.ok) return { event, outcome: 'delivered' };
    const expiresAt = event.expiresAt?.getTime() ?? event.occurredAt.getTime() + options.maxAgeMs;
    const nextAt = Date.now() + backoffMs(event.attempts + 1, options.backoffMs, options.maxBackoffMs, outcome.retryAfterMs);
    if (!outcome.retry) return { event, outcome: 'dead', error: outcome.error };
    if (nextAt > expiresAt) return { event, outcome: 'dead', error: `${outcome.error}; gave up after the maximum age` };
    return { event, outcome: 'retry', nextAttemptAt: new Date(nextAt), error: outcome.error };
  }

  // Results are written as posts end, a few milliseconds' worth at a time, and a range is deleted
  // in the write that follows its last result; through a PostgreSQL outage they are held and
  // retried, never posted again because a write failed.
  type Written = { result: DispatchResult; claim: Claim } | { completed: string };
  const results = createWriteBehind<Written>({
    what: 'webhook results',
    log,
    write: (items) =>
      recordDispatch(
        db.pool,
        items.flatMap((item) => ('result' in item ? [item.result] : [])),
        items.flatMap((item) => ('completed' in item ? [item.completed] : [])),
      ),
  });

  /** Claimed and not started, in order (a range's events by seq), each with its claim. */
  let waiting: { event: DueEvent; claim: Claim }[] = [];
  /** What this dispatcher holds: ranges until their last result is written, retries until theirs is. */
  const heldRanges = new Map<string, Claim & { kind: 'range' }>();
  const heldRetries = new Map<string, Claim & { kind: 'retry' }>();
  /** Ordering keys (per topic) with a post in flight: their next event waits for it. */
  const inFlight = new Set<string>();
  const keyOf = (event: DueEvent) => `${event.topic}\u0000${event.orderingKey}`;
  /** Pending writes (results and completions) of runOnce or of the pipeline. */
  const recorded = new Set<Promise<void>>();

  function track(written: Promise<void>) {
    recorded.add(written);
    const settled = written.finally(() => recorded.delete(written));
    // Whoever waits for it sees a failure; the write-behind has logged it already.
    settled.catch(() => undefined);
  }

  /** Hands results to the writer; a range whose every event has its result is completed after them. */
  function record(items: { result: DispatchResult; claim: Claim }[], empty?: Claim) {
    const completed: { completed: string }[] = [];
    const done = (claim: Claim) => claim.kind === 'range' && claim.open === 0 && !claim.lost && completed.push({ completed: claim.range.id });
    for (const item of items) {
      if (item.claim.kind === 'range') {
        item.claim.open -= 1;
        done(item.claim);
      }
    }
    if (empty && !items.length) done(empty);
    const written = results.add([...items, ...completed]).then(() => {
      for (const { result, claim } of items) if (claim.kind === 'retry') heldRetries.delete(result.event.id);
      for (const { completed: id } of completed) heldRanges.delete(id);
    });
    track(written);
  }

  let renewing: NodeJS.Timeout | undefined;
  let renewers = 0;
  async function renewLeases() {
    const rangeIds = [...heldRanges.keys()];
    const kept = await extendDispatchLeases(db.pool, rangeIds, [...heldRetries.keys()], options.leaseMs);
    const now = Date.now();
    for (const id of rangeIds) {
      const claim = heldRanges.get(id);
      if (!claim) continue;
      const leaseUntil = kept.get(id);
      if (leaseUntil) claim.lastStart = lastStartOf(leaseUntil.getTime());
      else loseRange(claim);
    }
    for (const claim of heldRetries.values()) claim.lastStart = Math.max(claim.lastStart, lastStartOf(now + options.leaseMs));
  }
  function renew(on: boolean) {
    renewers += on ? 1 : -1;
    if (renewers === 1 && !renewing) {
      renewing = setInterval(() => void renewLeases().catch(() => undefined), Math.max(100, options.leaseMs / 3));
    } else if (renewers === 0) {
      clearInterval(renewing);
      renewing = undefined;
    }
  }

  /**
   * A post may start only if it ends (timeoutMs), and is recorded, while the claim is still ours:
   * past the lease another dispatcher takes the range (or the retry) and sends it too.
   */
  const lastStartOf = (leaseUntil: number) => leaseUntil - options.timeoutMs - options.leaseMs / 10;

  /** A range another dispatcher took (its lease lapsed): none of its events is started any more here. */
  function loseRange(claim: Claim & { kind: 'range' }) {
    if (claim.lost) return;
    claim.lost = true;
    heldRanges.delete(claim.range.id);
    waiting = waiting.filter((item) => item.claim !== claim);
    log.warn({ topic: claim.range.topic }, 'lost a range of events to another dispatcher (its lease lapsed); it posts them');
  }

  /** The days where the events not through yet are (see openEventWindow), opened again every few seconds. */
  let window: { value: EventWindow; until: number } | undefined;
  async function eventWindow(): Promise<EventWindow> {
    if (!window || Date.now() >= window.until) window = { value: await openEventWindow(db.pool, topics), until: Date.now() + EVENT_WINDOW_MS };
    return window.value;
  }

  async function claimMore(limit: number): Promise<number> {
    let claimed = 0;
    const now = Date.now();
    const within = await eventWindow();
    for (const { event, lease } of await claimRetries(db.pool, topics, limit, options.leaseMs, within)) {
      const claim: Claim = { kind: 'retry', lease, lastStart: lastStartOf(now + options.leaseMs), started: 0 };
      heldRetries.set(event.id, claim);
      waiting.push({ event, claim });
      claimed += 1;
    }
    for (const topic of topics) {
      if (claimed >= limit) break;
      const range = await takeRange(db.pool, topic, limit - claimed, options.leaseMs, within);
      if (!range) continue;
      const events = await rangeEvents(db.pool, range);
      const claim: Claim = { kind: 'range', range, lastStart: lastStartOf(range.leaseUntil.getTime()), started: 0, open: events.length, lost: false };
      heldRanges.set(range.id, claim);
      // An event with an earlier one of its key not through yet waits behind it, as a retry.
      const held: { result: DispatchResult; claim: Claim }[] = [];
      for (const event of events) {
        if (event.blocked) held.push({ result: { event, outcome: 'held' }, claim });
        else waiting.push({ event, claim });
      }
      if (held.length || !events.length) record(held, claim);
      claimed += Math.max(1, events.length);
    }
    if (claimed) wakeWorkers();
    return claimed;
  }

  /** Whether a post of this claim may still start (its first `concurrency` posts always may). */
  const mayStart = (claim: Claim) => claim.started < options.concurrency || Date.now() <= claim.lastStart;

  /**
   * The next claimed events to post together: one, or up to statusBatchMax batched status events of
   * different keys, in order. An event whose key has a post in flight (or an earlier event not
   * started) waits. Retries too late for their lease are given back; the events of a range too late
   * become retries (see spill).
   */
  function take(): DueEvent[] {
    const next: DueEvent[] = [];
    const claims = new Set<Claim>();
    const lateRetries: { id: string; lease: Date }[] = [];
    const lateRanges = new Set<Claim>();
    const passed = new Set<string>();
    /** Indexes of the items taken out of `waiting`. */
    const out: number[] = [];
    // Stops as soon as the post is full: with many events claimed, each take reads only the head.
    for (let i = 0; i < waiting.length && !(next.length && next.length >= (batched(next[0]) ? statusBatchMax : 1)); i++) {
      const { event, claim } = waiting[i];
      const key = keyOf(event);
      const fits = next.length === 0 || (batched(next[0]) && event.topic === next[0].topic);
      if (!fits || inFlight.has(key) || passed.has(key)) {
        passed.add(key);
        continue;
      }
      passed.add(key);
      if (!mayStart(claim)) {
        if (claim.kind === 'retry') {
          lateRetries.push({ id: event.id, lease: claim.lease });
          heldRetries.delete(event.id);
          out.push(i);
        } else lateRanges.add(claim);
        continue;
      }
      next.push(event);
      claims.add(claim);
      claimed.set(event.id, claim);
      inFlight.add(key);
      out.push(i);
    }
    if (out.length === 1) waiting.splice(out[0], 1);
    else if (out.length) {
      const gone = new Set(out);
      waiting = waiting.filter((_, i) => !gone.has(i));
    }
    if (lateRanges.size) spill(lateRanges);
    // A post counts once for each claim it holds events of.
    for (const claim of claims) claim.started += 1;
    if (lateRetries.length) void releaseDispatch(db.pool, [], lateRetries).catch(() => undefined);
    if (waiting.length <= options.batchSize / 2) wakeClaimer();
    return next;
  }

  /**
   * A range too late for its lease to start another post: its events not started yet become
   * retries, due now (each still behind the earlier events of its key), written while the range is
   * still ours, and the range completes once its posts in flight are recorded. Giving the whole
   * range up instead would have its next holder post again every event already delivered.
   */
  function spill(late: Set<Claim>) {
    const held = hold((item) => late.has(item.claim));
    if (held.length) record(held);
  }

  /** Takes the waiting events that match out of `waiting`, each as held (a retry due now, behind its key). */
  function hold(matches: (item: { event: DueEvent; claim: Claim }) => boolean): { result: DispatchResult; claim: Claim }[] {
    const held: { result: DispatchResult; claim: Claim }[] = [];
    waiting = waiting.filter((item) => {
      if (!matches(item)) return true;
      held.push({ result: { event: item.event, outcome: 'held' }, claim: item.claim });
      return false;
    });
    return held;
  }

  /** Posts the events and hands their results to the writer; resolves once the post ended. */
  async function postEvents(events: DueEvent[]): Promise<void> {
    const claims = new Map(events.map((event) => [event.id, claimOf(event)]));
    let outcomes: DispatchResult[];
    try {
      outcomes = await dispatch(events);
    } finally {
      for (const event of events) inFlight.delete(keyOf(event));
    }
    const items: { result: DispatchResult; claim: Claim }[] = [];
    for (const result of outcomes) {
      const claim = claims.get(result.event.id)!;
      items.push({ result, claim });
      if (result.outcome === 'dead') log.warn({ event: result.event.id, topic: result.event.topic, error: result.error }, 'event moved to the dead letters');
      // The key's later events wait behind this one: they become retries, due now, that go out after it.
      if (result.outcome === 'retry') {
        const key = keyOf(result.event);
        items.push(...hold((item) => keyOf(item.event) === key));
      }
    }
    record(items);
    wakeWorkers();
  }

  /** The claims of events being posted (set by take), found when their post ends. */
  const claimed = new Map<string, Claim>();
  function claimOf(event: DueEvent): Claim {
    const claim = claimed.get(event.id)!;
    claimed.delete(event.id);
    return claim;
  }

  async function runOnce(): Promise<number> {
    renew(true);
    try {
      const count = await claimMore(options.batchSize);
      await Promise.all(
        Array.from({ length: Math.min(options.concurrency, Math.max(1, waiting.length)) }, async () => {
          for (let events = take(); events.length; events = take()) await postEvents(events);
        }),
      );
      // Events that waited behind a post of their key still in flight when a loop ended.
      while (waiting.length) {
        const events = take();
        if (!events.length) break;
        await postEvents(events);
      }
      await Promise.all([...recorded]);
      return count;
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
      if (events.length) await postEvents(events).catch(() => undefined);
      else await new Promise<void>((resolve) => idle.push(resolve));
    }
  }

  /** Gives back what is claimed and not posted: the retries, and the ranges (posted again from their start by whoever takes them). */
  function giveBack(): Promise<number> {
    const retries = waiting.flatMap(({ event, claim }) => (claim.kind === 'retry' ? [{ id: event.id, lease: claim.lease }] : []));
    const ranges = [...new Set(waiting.flatMap(({ claim }) => (claim.kind === 'range' ? [claim] : [])))];
    waiting = [];
    for (const retry of retries) heldRetries.delete(retry.id);
    for (const claim of ranges) {
      claim.lost = true;
      heldRanges.delete(claim.range.id);
    }
    return releaseDispatch(
      db.pool,
      ranges.map((claim) => claim.range.id),
      retries,
    );
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
      // What is claimed is posted before stopping: a range given back half posted would be posted
      // again from its start. release() gives it back if this outlasts the shutdown deadline.
      while (waiting.length) {
        const events = take();
        if (!events.length) break;
        await postEvents(events).catch(() => undefined);
      }
      await giveBack().catch(() => undefined);
      await Promise.allSettled([...recorded]);
      renew(false);
      await outbound.close();
    },
    release() {
      return giveBack();
    },
  };
}
