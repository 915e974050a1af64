import { backoffMs, type LogSink } from '@operator/config';
import { isDbUnavailable } from './client';

export interface WriteBehindOptions<T> {
  /** Writes one batch in one go (one statement or one transaction); throws to have it retried. */
  write(items: T[]): Promise<void>;
  log: LogSink;
  /** What is being written, for the logs ("send outcomes"). */
  what: string;
  /** How long items are gathered before a write. */
  flushMs?: number;
  /** Most items in one write. */
  maxBatch?: number;
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
  done(error?: Error): void;
}

/**
 * Work that was done but not yet recorded (a push sent, a webhook delivered, a credit carried out)
 * is held here and written in small batches a few milliseconds apart. When PostgreSQL cannot take
 * a write, the items stay in memory and the write is retried with backoff until it goes through:
 * the work is never redone because a write failed.
 */
export function createWriteBehind<T>(options: WriteBehindOptions<T>): WriteBehind<T> {
  const { write, log, what, flushMs = 5, maxBatch = 500, retryMs = 100, retryMaxMs = 5000, maxFailures = 5 } = options;
  const queue: Entry<T>[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> | undefined;
  let failures = 0;
  let outage = false;
  /** Set by a failed round: the delay before the next one. */
  let retryAt: number | undefined;
  const drained: (() => void)[] = [];

  const afterRound = () => {
    if (retryAt !== undefined) {
      const delay = retryAt;
      retryAt = undefined;
      schedule(delay);
      return;
    }
    if (queue.length) return;
    for (const resolve of drained.splice(0)) resolve();
  };

  /** Starts a write round after `delayMs`, unless one is already due or running. */
  function schedule(delayMs: number) {
    if (timer || writing) return;
    timer = setTimeout(() => {
      timer = undefined;
      writing = writeAll().finally(() => {
        writing = undefined;
        afterRound();
      });
    }, delayMs);
  }

  /** Writes until the queue is empty, or a write fails (then a retry round is scheduled). */
  async function writeAll(): Promise<void> {
    while (queue.length) {
      const batch = queue.slice(0, maxBatch);
      try {
        await write(batch.map((entry) => entry.item));
      } catch (error) {
        failures += 1;
        if (!isDbUnavailable(error) && failures >= maxFailures) {
          queue.splice(0, batch.length);
          failures = 0;
          log.error({ err: error, items: batch.length }, `could not record ${what}; giving them up`);
          for (const entry of batch) entry.done(error instanceof Error ? error : new Error(String(error)));
          continue;
        }
        if (!outage) log.warn({ err: (error as Error).message, items: queue.length }, `could not record ${what} yet; holding them and retrying`);
        outage = true;
        retryAt = backoffMs(failures, retryMs, retryMaxMs);
        return;
      }
      queue.splice(0, batch.length);
      if (outage) log.info({ items: batch.length }, `recorded the ${what} held during the outage`);
      failures = 0;
      outage = false;
      for (const entry of batch) entry.done();
    }
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
        for (const item of items) queue.push({ item, done });
        schedule(queue.length >= maxBatch ? 0 : flushMs);
      });
    },
    get pending() {
      return queue.length;
    },
    drain() {
      if (!queue.length && !writing) return Promise.resolve();
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
