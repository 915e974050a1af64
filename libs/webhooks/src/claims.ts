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
  type Db,
  type DispatchRange,
  type DispatchResult,
  type DueEvent,
  type EventWindow,
} from '@operator/db';
import type { LogSink } from '@operator/config';

/** How long an event window is used before it is opened again (it holds for a day). */
const EVENT_WINDOW_MS = 5000;

/** What events are held by: a range of a topic's first tries, or one claimed retry. */
export type Claim =
  | { kind: 'range'; range: DispatchRange; lastStart: number; started: number; open: number; lost: boolean }
  | { kind: 'retry'; lease: Date; lastStart: number; started: number };

/** A claimed event, with what holds it. */
export interface Claimed {
  event: DueEvent;
  claim: Claim;
}

export interface ClaimedResult {
  result: DispatchResult;
  claim: Claim;
}

/** Where claimed events wait to be posted. */
export interface ClaimQueue {
  add(items: Claimed[]): void;
  remove(matches: (item: Claimed) => boolean): Claimed[];
  readonly waiting: number;
}

export interface ClaimSourceOptions {
  db: Db;
  log: LogSink;
  topics: string[];
  queue: ClaimQueue;
  /** How long a claim stays ours; a dispatcher killed mid-post leaves it to be taken again after this. */
  leaseMs: number;
  /** Longest a post takes: one starts only if it ends while the claim is ours. */
  timeoutMs: number;
  /** A claim's first this many posts start whatever its lease. */
  concurrency: number;
  /** Events claimed at once; more are claimed as soon as half of them are taken. */
  batchSize: number;
  /** Pause between polls when there is nothing to claim. */
  idleMs: number;
}

export interface ClaimSource {
  /** Claims up to `limit` due events (retries, then ranges topic by topic) into the queue; answers how many. */
  claim(limit: number): Promise<number>;
  /** Whether a post of the item may still start within its claim's lease. */
  mayStart(item: Claimed): boolean;
  /** A group was taken to be posted: counts a post for each of its claims, and claims more when the queue runs low. */
  taken(group: Claimed[]): void;
  /** Items too late for their lease: retries are given back, their ranges' events held as retries. */
  late(items: Claimed[]): void;
  /** Hands results to the writer; a range whose every event has its result is completed after them. */
  record(items: ClaimedResult[]): void;
  /** Keeps the leases renewed while anyone holds it on (counted). */
  renew(on: boolean): void;
  /** Claims continuously, topping the queue up to batchSize. */
  start(): void;
  stop(): Promise<void>;
  /** Gives back what is claimed and still waiting; answers how many ranges and retries. */
  giveBack(): Promise<number>;
  /** Resolves once every result handed in so far is written; rejects if one was given up. */
  written(): Promise<void>;
}

/** Results of events that wait behind an earlier one of their key: retries, due now. */
export const held = (items: Claimed[]): ClaimedResult[] => items.map(({ event, claim }) => ({ result: { event, outcome: 'held' }, claim }));

/**
 * Claims outbox events for one dispatcher and keeps them its own: ranges of each topic's first
 * tries and single retries, under leases renewed while it posts. Results are written behind, a few
 * milliseconds' worth at a time, and a range is deleted in the write after its last result; through
 * a PostgreSQL outage they are held and retried, never posted again because a write failed.
 */
export function createClaimSource(options: ClaimSourceOptions): ClaimSource {
  const { db, log, topics, queue, leaseMs } = options;

  type Written = ClaimedResult | { completed: string };
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
  /** What is ours: ranges until their last result is written, retries until theirs is. */
  const heldRanges = new Map<string, Claim & { kind: 'range' }>();
  const heldRetries = new Map<string, Claim & { kind: 'retry' }>();
  /** Writes not done yet. */
  const recorded = new Set<Promise<void>>();

  function track(written: Promise<void>) {
    recorded.add(written);
    const settled = written.finally(() => recorded.delete(written));
    // Whoever waits for it sees a failure; the write-behind has logged it already.
    settled.catch(() => undefined);
  }

  function record(items: ClaimedResult[], empty?: Claim) {
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

  /**
   * A post may start only if it ends (timeoutMs), and is recorded, while the claim is still ours:
   * past the lease another dispatcher takes the range (or the retry) and sends it too.
   */
  const lastStartOf = (leaseUntil: number) => leaseUntil - options.timeoutMs - leaseMs / 10;

  /** A range another dispatcher took (its lease lapsed): none of its events is started any more here. */
  function loseRange(claim: Claim & { kind: 'range' }) {
    if (claim.lost) return;
    claim.lost = true;
    heldRanges.delete(claim.range.id);
    queue.remove((item) => item.claim === claim);
    log.warn({ topic: claim.range.topic }, 'lost a range of events to another dispatcher (its lease lapsed); it posts them');
  }

  let renewing: NodeJS.Timeout | undefined;
  let renewers = 0;
  async function renewLeases() {
    const rangeIds = [...heldRanges.keys()];
    const kept = await extendDispatchLeases(db.pool, rangeIds, [...heldRetries.keys()], leaseMs);
    const now = Date.now();
    for (const id of rangeIds) {
      const claim = heldRanges.get(id);
      if (!claim) continue;
      const leaseUntil = kept.get(id);
      if (leaseUntil) claim.lastStart = lastStartOf(leaseUntil.getTime());
      else loseRange(claim);
    }
    for (const claim of heldRetries.values()) claim.lastStart = Math.max(claim.lastStart, lastStartOf(now + leaseMs));
  }

  /** The days where the events not through yet are (see openEventWindow), opened again every few seconds. */
  let window: { value: EventWindow; until: number } | undefined;
  async function eventWindow(): Promise<EventWindow> {
    if (!window || Date.now() >= window.until) window = { value: await openEventWindow(db.pool, topics), until: Date.now() + EVENT_WINDOW_MS };
    return window.value;
  }

  async function claim(limit: number): Promise<number> {
    let claimed = 0;
    const now = Date.now();
    const within = await eventWindow();
    const retries: Claimed[] = [];
    for (const { event, lease } of await claimRetries(db.pool, topics, limit, leaseMs, within)) {
      const claim: Claim = { kind: 'retry', lease, lastStart: lastStartOf(now + leaseMs), started: 0 };
      heldRetries.set(event.id, claim);
      retries.push({ event, claim });
      claimed += 1;
    }
    queue.add(retries);
    for (const topic of topics) {
      if (claimed >= limit) break;
      const range = await takeRange(db.pool, topic, limit - claimed, leaseMs, within);
      if (!range) continue;
      const events = await rangeEvents(db.pool, range);
      const claim: Claim = { kind: 'range', range, lastStart: lastStartOf(range.leaseUntil.getTime()), started: 0, open: events.length, lost: false };
      heldRanges.set(range.id, claim);
      // An event with an earlier one of its key not through yet waits behind it, as a retry.
      const blocked = events.filter((event) => event.blocked);
      if (blocked.length || !events.length) record(held(blocked.map((event) => ({ event, claim }))), claim);
      queue.add(events.filter((event) => !event.blocked).map((event) => ({ event, claim })));
      claimed += Math.max(1, events.length);
    }
    return claimed;
  }

  // Claims in the background: tops the queue up to batchSize whenever half of it is taken.
  let polling = false;
  let roomFor: (() => void) | undefined;
  function wake() {
    roomFor?.();
    roomFor = undefined;
  }
  const claimer = createPoller({
    what: 'dispatch',
    log,
    idleMs: options.idleMs,
    round: async () => {
      if (queue.waiting > options.batchSize / 2) await new Promise<void>((resolve) => (roomFor = resolve));
      if (!polling) return false;
      const wanted = options.batchSize - queue.waiting;
      return (await claim(wanted)) >= wanted;
    },
  });

  return {
    claim,
    // A claim's first `concurrency` posts always may start.
    mayStart: ({ claim }) => claim.started < options.concurrency || Date.now() <= claim.lastStart,
    taken(group) {
      // A post counts once for each claim it holds events of.
      const claims = new Set<Claim>();
      for (const { claim } of group) claims.add(claim);
      for (const claim of claims) claim.started += 1;
      if (queue.waiting <= options.batchSize / 2) wake();
    },
    late(items) {
      const retries = items.flatMap(({ event, claim }) => (claim.kind === 'retry' ? [{ id: event.id, lease: claim.lease }] : []));
      for (const { id } of retries) heldRetries.delete(id);
      if (retries.length) void releaseDispatch(db.pool, [], retries).catch(() => undefined);
      // The range's events not started yet become retries, due now, written while the range is
      // still ours; giving the range up instead would have its next holder post again every event
      // already delivered.
      const ranges = new Set<Claim>(items.flatMap(({ claim }) => (claim.kind === 'range' ? [claim] : [])));
      if (!ranges.size) return;
      const spilled = [...items.filter((item) => ranges.has(item.claim)), ...queue.remove((item) => ranges.has(item.claim))];
      record(held(spilled));
    },
    record: (items) => record(items),
    renew(on) {
      renewers += on ? 1 : -1;
      if (renewers === 1 && !renewing) {
        renewing = setInterval(() => void renewLeases().catch(() => undefined), Math.max(100, leaseMs / 3));
      } else if (renewers === 0) {
        clearInterval(renewing);
        renewing = undefined;
      }
    },
    start() {
      polling = true;
      claimer.start();
    },
    async stop() {
      polling = false;
      wake();
      await claimer.stop();
    },
    giveBack() {
      const items = queue.remove(() => true);
      const retries = items.flatMap(({ event, claim }) => (claim.kind === 'retry' ? [{ id: event.id, lease: claim.lease }] : []));
      const ranges = [...new Set(items.flatMap(({ claim }) => (claim.kind === 'range' ? [claim] : [])))];
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
    },
    async written() {
      const failed = (await Promise.allSettled([...recorded])).find((outcome) => outcome.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}
