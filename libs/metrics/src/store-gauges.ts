import type { LogSink } from '@operator/config';
import type { OutboxTopicBacklog } from '@operator/db';
import { credits, deadLetters, outboxOldestPendingSeconds, outboxPendingEvents, queueJobs, storeReadFailures } from './catalog';

export interface QueueJobsReading {
  queue: string;
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
}

/** An app names only the readings it has the stores for. */
export interface StoreReaders {
  queueJobs?: () => Promise<QueueJobsReading[]>;
  outbox?: () => Promise<OutboxTopicBacklog[]>;
  deadLetters?: () => Promise<number>;
  credits?: () => Promise<{ state: string; brand: string; count: number }[]>;
}

export interface StoreGaugeOptions {
  log: LogSink;
  /** Several scrapes within this cost one reading. */
  maxAgeMs?: number;
  /** A reading that takes longer counts as failed; its gauges keep their last values. */
  timeoutMs?: number;
}

export interface StoreGauges {
  /** Never throws, and takes timeoutMs at most. */
  refresh(): Promise<void>;
}

/** Longest a scrape waits for one reading, and longest a reading's statement may run. */
export const STORE_READ_TIMEOUT_MS = 2000;

const JOB_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

const APPLY: { [R in keyof StoreReaders]-?: (value: Awaited<ReturnType<NonNullable<StoreReaders[R]>>>) => void } = {
  queueJobs(counts) {
    for (const count of counts) for (const state of JOB_STATES) queueJobs.set({ queue: count.queue, state }, count[state]);
  },
  outbox(backlog) {
    for (const { topic, pending, oldestSeconds } of backlog) {
      outboxPendingEvents.set({ topic }, pending);
      outboxOldestPendingSeconds.set({ topic }, oldestSeconds);
    }
  },
  deadLetters(count) {
    deadLetters.set(count);
  },
  credits(counts) {
    for (const { state, brand, count } of counts) credits.set({ state, brand }, count);
  },
};

const READING_NAMES: Record<keyof StoreReaders, string> = { queueJobs: 'queue_jobs', outbox: 'outbox', deadLetters: 'dead_letters', credits: 'credits' };

function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Read when scraped, not on a timer, so an app nobody scrapes reads nothing; a store down keeps its gauges' last values. */
export function watchStores(readers: StoreReaders, { log, maxAgeMs = 5000, timeoutMs = STORE_READ_TIMEOUT_MS }: StoreGaugeOptions): StoreGauges {
  const readings = (Object.keys(READING_NAMES) as (keyof StoreReaders)[]).flatMap((key) => {
    const read = readers[key] as (() => Promise<never>) | undefined;
    if (!read) return [];
    const apply = APPLY[key] as (value: unknown) => void;
    const name = READING_NAMES[key];
    const failures = storeReadFailures.labels(name);
    let failing = false;
    // A reading that outlived its timeout is not started again until it ends: a store that hangs
    // does not collect one stuck query per scrape.
    let running: Promise<unknown> | undefined;
    return [
      async () => {
        if (running) {
          failures.inc();
          return;
        }
        running = read().finally(() => (running = undefined));
        try {
          apply(await within(running, timeoutMs));
          if (failing) log.info({ reading: name }, 'metrics: store readings are back');
          failing = false;
        } catch (error) {
          failures.inc();
          if (!failing) log.warn({ reading: name, err: (error as Error).message }, 'metrics: cannot read the store; its gauges keep their last values');
          failing = true;
        }
      },
    ];
  });

  let readAt = -Infinity;
  let inFlight: Promise<void> | undefined;
  return {
    refresh() {
      if (inFlight) return inFlight;
      if (performance.now() - readAt < maxAgeMs) return Promise.resolve();
      readAt = performance.now();
      inFlight = Promise.all(readings.map((reading) => reading())).then(() => {
        inFlight = undefined;
      });
      return inFlight;
    },
  };
}
