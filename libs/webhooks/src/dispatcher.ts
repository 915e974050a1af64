import type { Db, DueEvent } from '@operator/db';
import type { LogSink } from '@operator/config';
import { createClaimSource, held, type Claimed, type ClaimedResult } from './claims';
import { createPoster, type PosterOptions } from './poster';
import { createKeyedScheduler } from './scheduler';

export interface DispatcherOptions extends PosterOptions {
  db: Db;
  log: LogSink;
  /** Events claimed from the outbox at once; more are claimed as soon as half of them are posted. */
  batchSize: number;
  /** How long a claimed event stays ours; a dispatcher killed mid-post leaves it to be taken again after this. */
  leaseMs: number;
  /** Pause between polls when there is nothing to send. */
  idleMs: number;
}

export interface Dispatcher {
  /** One round: claim a batch of due events, post them, record the outcomes. Answers how many were claimed. */
  runOnce(): Promise<number>;
  /** Posts continuously: `concurrency` posts in flight, claims refilled as they are taken, results recorded as posts end. */
  start(): void;
  /** Stops claiming, posts what is claimed, gives back what could not be, and ends once the results are recorded. */
  stop(): Promise<void>;
  /** Gives back the claims on events claimed and not posted (shutdown past its deadline). */
  release(): Promise<number>;
}

const keyOf = (event: DueEvent) => `${event.topic}\u0000${event.orderingKey}`;

/**
 * Delivers outbox events to the CRM: a claim source takes them from PostgreSQL, a scheduler posts
 * each ordering key's events one at a time and in order (`concurrency` posts at once), and a poster
 * sends them. With statusBatchMax > 1, status events of different keys go out together in arrays.
 */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { log } = options;
  const poster = createPoster(options);
  /** The first post that threw since the last look: runOnce rethrows it, the continuous run carries on. */
  let failure: { error: unknown } | undefined;
  const takeFailure = () => {
    const taken = failure;
    failure = undefined;
    return taken;
  };

  const scheduler = createKeyedScheduler<Claimed>({
    concurrency: options.concurrency,
    keyOf: (item) => keyOf(item.event),
    groupMax: (first) => poster.batchMax(first.event),
    joins: (first, item) => item.event.topic === first.event.topic,
    admit: (item) => claims.mayStart(item),
    refused: (items) => claims.late(items),
    taken: (group) => claims.taken(group),
    run: post,
    failed: (error) => (failure ??= { error }),
  });
  const claims = createClaimSource({ ...options, topics: poster.topics, queue: scheduler });

  /** Posts a group and hands its results to the writer. */
  async function post(group: Claimed[]): Promise<void> {
    const claimOf = new Map(group.map((item) => [item.event.id, item.claim]));
    const items: ClaimedResult[] = [];
    for (const result of await poster.dispatch(group.map((item) => item.event))) {
      items.push({ result, claim: claimOf.get(result.event.id)! });
      if (result.outcome === 'dead') log.warn({ event: result.event.id, topic: result.event.topic, error: result.error }, 'event moved to the dead letters');
      // The key's later events wait behind this one: they become retries, due now, that go out after it.
      if (result.outcome === 'retry') {
        const key = keyOf(result.event);
        items.push(...held(scheduler.remove((item) => keyOf(item.event) === key)));
      }
    }
    claims.record(items);
  }

  let running = false;
  return {
    async runOnce() {
      claims.renew(true);
      takeFailure();
      try {
        const count = await claims.claim(options.batchSize);
        await scheduler.idle();
        const failed = takeFailure();
        if (failed) throw failed.error;
        await claims.written();
        return count;
      } finally {
        claims.renew(false);
      }
    },
    start() {
      if (running) return;
      running = true;
      claims.renew(true);
      claims.start();
    },
    async stop() {
      if (!running) return;
      running = false;
      await claims.stop();
      // What is claimed is posted before stopping: a range given back half posted would be posted
      // again from its start. release() gives it back if this outlasts the shutdown deadline.
      await scheduler.idle();
      await claims.giveBack().catch(() => undefined);
      await claims.written().catch(() => undefined);
      claims.renew(false);
      await poster.close();
    },
    release: () => claims.giveBack(),
  };
}
