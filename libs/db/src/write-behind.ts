import { backoffMs, type LogSink } from '@operator/config';
import { isDbUnavailable } from './client';

export interface WriteBehindOptions<T> {
  /** Writes one batch in one go (one statement or one transaction); throws to have it retried. */
  write(items: T[]): Promise<void>;
  log: LogSink;
  /** For the logs ("send outcomes"). */
  what: string;
  /** A write goes at most this long after the first item waiting. */
  flushMs?: number;
  maxBatch?: number;
  /** Writes in flight at once; above 1 (the default), batches may commit out of order. */
  maxWriting?: number;
  retryMs?: number;
  retryMaxMs?: number;
  /** Tries of a write failing for a reason other than an outage before its items are rejected. */
  maxFailures?: number;
}

export interface WriteBehind<T> {
  /** Rejects only when a write keeps failing for a reason that is not an outage. */
  add(items: T[]): Promise<void>;
  readonly pending: number;
  /** Resolves once everything added so far is written (or given up). */
  drain(): Promise<void>;
  /** Writes what waits now, without waiting for `flushMs` (when no write is free, as soon as one is). */
  flushNow(): void;
}

interface Entry<T> {
  item: T;
  at: number;
  done(error?: Error): void;
}

/**
 * Records work already done (a push sent, a credit carried out) in batches. While PostgreSQL cannot
 * take a write the items stay in memory and are retried: work is never redone because a write failed.
 */
export function createWriteBehind<T>(options: WriteBehindOptions<T>): WriteBehind<T> {
  const { write, log, what, flushMs = 5, maxBatch = 500, maxWriting = 1, retryMs = 100, retryMaxMs = 5000, maxFailures = 5 } = options;
  /** Oldest first: a failed write puts its batch back in front. */
  const queue: Entry<T>[] = [];
  let inFlight = 0;
  let writing = 0;
  let timer: NodeJS.Timeout | undefined;
  /** While a failed write waits for its retry, nothing else is written. */
  let retrying = false;
  let failures = 0;
  let outage = false;
  const drained: (() => void)[] = [];

  function settleDrains() {
    if (queue.length || writing || retrying) return;
    for (const resolve of drained.splice(0)) resolve();
  }

  /** Starts as many writes as may run at once: one while PostgreSQL fails them. */
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
    flushNow() {
      if (retrying || !queue.length) return;
      clearTimeout(timer);
      timer = undefined;
      flush();
    },
  };
}

/** Retries one write while the database is unreachable, so work already done is recorded, not redone. */
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
