import { backoffMs, type LogSink } from '@operator/config';
import { isDbUnavailable } from './client';

export interface WriteBehindOptions<T> {
  /** Writes one batch in one go (one statement or one transaction); throws to have it retried. */
  write(items: T[]): Promise<void>;
  log: LogSink;
  /** What is being written, for the logs ("send outcomes"). */
  what: string;
  /** How long items are gathered before a write: at most this long after the first one waiting. */
  flushMs?: number;
  /** Most items in one write. */
  maxBatch?: number;
  /**
   * Writes in flight at once. 1 (the default) keeps batches in order; more lets a batch go out on
   * another connection while a slow write runs (batches may then commit in any order).
   */
  maxWriting?: number;
  /** First retry delay; doubles (jittered) up to retryMaxMs. */
  retryMs?: number;
  retryMaxMs?: number;
  /** Tries of a write that fails for a reason other than an unreachable database, before its items are given up (rejected). */
  maxFailures?: number;
}

export interface WriteBehind<T> {
  /** Resolves once the item is written; rejects only when a write keeps failing for a reason that is not an outage. */
  add(items: T[]): Promise<void>;
  /** Items added and not written yet. */
  readonly pending: number;
  /** Resolves once everything added so far is written (or given up). */
  drain(): Promise<void>;
}

interface Entry<T> {
  item: T;
  /** When it was added (ms, monotonic). */
  at: number;
  done(error?: Error): void;
}

/**
 * Holds work done but not yet recorded (a push sent, a webhook delivered, a credit carried out) and
 * writes it in batches, at most `flushMs` after the first item. While PostgreSQL cannot take a write
 * the items stay in memory and the write is retried: work is never redone because a write failed.
 */
export function createWriteBehind<T>(options: WriteBehindOptions<T>): WriteBehind<T> {
  const { write, log, what, flushMs = 5, maxBatch = 500, maxWriting = 1, retryMs = 100, retryMaxMs = 5000, maxFailures = 5 } = options;
  /** Items not taken by a write yet, oldest first (a failed write puts its batch back in front). */
  const queue: Entry<T>[] = [];
  /** Items in the writes in flight. */
  let inFlight = 0;
  let writing = 0;
  /** The next write round: `flushMs` after the first item waiting, or a retry's backoff. */
  let timer: NodeJS.Timeout | undefined;
  /** Set while a failed write waits for its retry: nothing else is written meanwhile. */
  let retrying = false;
  let failures = 0;
  let outage = false;
  const drained: (() => void)[] = [];

  function settleDrains() {
    if (queue.length || writing || retrying) return;
    for (const resolve of drained.splice(0)) resolve();
  }

  /** Starts writes of what is waiting, as many as may run at once (one at a time while PostgreSQL fails them). */
  function flush() {
    while (queue.length && writing < (outage ? 1 : maxWriting) && !retrying) {
      const batch = queue.splice(0, maxBatch);
      writing += 1;
      inFlight += batch.length;
      void writeBatch(batch).finally(() => {
        writing -= 1;
        inFlight -= batch.length;
        // What waited for a free write (all busy when its time came) goes now; what came since, at its time.
        if (!retrying && queue.length && (!timer || performance.now() - queue[0].at >= flushMs)) flush();
        settleDrains();
      });
    }
  }

  /** Runs `flush` after `delayMs`, unless a round is already due. */
  function schedule(delayMs: number) {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      retrying = false;
      flush();
      settleDrains();
    }, delayMs);
  }

  async function writeBatch(batch: Entry<T>[]): Promise<void> {
    try {
      await write(batch.map((entry) => entry.item));
    } catch (error) {
      failures += 1;
      if (!isDbUnavailable(error) && failures >= maxFailures) {
        failures = 0;
        log.error({ err: error, items: batch.length }, `could not record ${what}; giving them up`);
        for (const entry of batch) entry.done(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      if (!outage) log.warn({ err: (error as Error).message, items: queue.length + inFlight }, `could not record ${what} yet; holding them and retrying`);
      outage = true;
      // Back in front, and written again after the backoff, with whatever came meanwhile.
      queue.unshift(...batch);
      if (!retrying) {
        retrying = true;
        clearTimeout(timer);
        timer = undefined;
        schedule(backoffMs(failures, retryMs, retryMaxMs));
      }
      return;
    }
    if (outage) log.info({ items: batch.length }, `recorded the ${what} held during the outage`);
    failures = 0;
    outage = false;
    for (const entry of batch) entry.done();
  }

  return {
    add(items) {
      if (!items.length) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        let left = items.length;
        let failed: Error | undefined;
        const done = (error?: Error) => {
          failed ??= error;
          if (--left === 0) (failed ? reject(failed) : resolve());
        };
        const at = performance.now();
        for (const item of items) queue.push({ item, at, done });
        if (retrying) return;
        if (queue.length >= maxBatch && writing < maxWriting) {
          clearTimeout(timer);
          timer = undefined;
          flush();
        } else schedule(flushMs);
      });
    },
    get pending() {
      return queue.length + inFlight;
    },
    drain() {
      if (!queue.length && !writing && !retrying) return Promise.resolve();
      return new Promise<void>((resolve) => drained.push(resolve));
    },
  };
}

/**
 * Runs one write (a statement or a transaction) until PostgreSQL takes it: retried with backoff
 * while the database is unreachable, so work already done is recorded rather than redone. Any
 * other error is thrown at once.
 */
export async function untilStored<T>(work: () => Promise<T>, log: LogSink, what: string, retryMs = 100, retryMaxMs = 5000): Promise<T> {
  for (let failures = 1; ; failures++) {
    try {
      const result = await work();
      if (failures > 1) log.info({}, `recorded ${what} after the outage`);
      return result;
    } catch (error) {
      if (!isDbUnavailable(error)) throw error;
      if (failures === 1) log.warn({ err: (error as Error).message }, `could not record ${what} yet; holding it and retrying`);
      await new Promise((resolve) => setTimeout(resolve, backoffMs(failures, retryMs, retryMaxMs)));
    }
  }
}
