import type { LogSink } from '@operator/config';
import type { ProviderName } from '@operator/contract';
import { dropLapsedLeases, inTransaction, isDbUnavailable, pingDb, takeStrandedPushes, type Db } from '@operator/db';
import { enqueueSendJobs, type PushQueues, type SendJobPolicy } from '@operator/queue';
import type { OutageClock } from './outage';

export interface ReconcileDeps {
  db: Db;
  queues: PushQueues;
  provider: ProviderName;
  log: LogSink;
  /** A delivery nothing has moved for this long has lost its job. */
  afterMs: number;
  /** The send lease: a push a live lease names is not stranded. */
  leaseMs: number;
  jobMaxMessages: number;
  sendPolicy: SendJobPolicy;
  /** Most deliveries looked at in one pass. */
  limit?: number;
}

/**
 * PostgreSQL is the source of truth; Redis may lose jobs (a failover, the lost tail of its
 * append-only file, a flushed queue, a job removed after its attempts). One pass finds this
 * provider's deliveries that nothing has moved for `afterMs` and enqueues their pushes again, in
 * the same transaction that marks them, so several reconcilers never enqueue the same ones twice
 * and a failed enqueue leaves them to the next pass. A push that was in fact still queued is only
 * looked at twice: its deliveries are sent once, under the lease of whichever job runs first.
 */
export async function reconcileOnce(deps: ReconcileDeps): Promise<string[]> {
  const round = Date.now().toString(36);
  // Leases of workers that died, lapsed for a lease's time more: nothing reads them any more.
  await dropLapsedLeases(deps.db.pool, deps.leaseMs);
  return inTransaction(deps.db, async (tx) => {
    const pushIds = await takeStrandedPushes(tx, deps.provider, deps.afterMs, deps.limit ?? 5000);
    if (!pushIds.length) return pushIds;
    const jobs = [];
    for (let i = 0; i < pushIds.length; i += deps.jobMaxMessages) {
      jobs.push({ provider: deps.provider, pushIds: pushIds.slice(i, i + deps.jobMaxMessages), round });
    }
    await enqueueSendJobs(deps.queues, jobs, deps.sendPolicy);
    deps.log.warn({ provider: deps.provider, pushes: pushIds.length }, 'enqueued again pushes whose send job was lost');
    return pushIds;
  });
}

export interface Reconciler {
  stop(): Promise<void>;
}

/**
 * Runs a pass every `intervalMs` until stopped; a pass that fails (a store is down) is logged and
 * tried at the next one.
 *
 * After PostgreSQL was out of its reach, the reconciler takes nothing for `quietAfterOutageMs` (a
 * lease's time by default) from the moment it reaches PostgreSQL again. The workers that were cut
 * off with it may hold sends whose outcome they could not write, under leases that lapsed meanwhile:
 * they renew those leases and write the outcomes as soon as they can (within a second or so), and
 * only then is a push whose lease is still lapsed taken as lost. Without the pause, the first pass
 * after a long outage could enqueue again pushes that were sent, and have them sent twice.
 */
export function startReconciler(deps: ReconcileDeps & { intervalMs: number; quietAfterOutageMs?: number; outage?: OutageClock }): Reconciler {
  const quietMs = deps.quietAfterOutageMs ?? deps.leaseMs;
  const slowPingMs = Math.max(1000, deps.leaseMs / 3);
  let running: Promise<void> | undefined;
  let failing = false;
  /** Set while PostgreSQL is out of reach (a pass failed for it). */
  let cutOff = false;
  /** When passes may take pushes again, after an outage of PostgreSQL. */
  let quietUntil = 0;

  const pass = async () => {
    // A ping first, timed: one that fails, or that waited long (in a pooler's queue while its server
    // was away), says PostgreSQL was out of reach; the pass then waits for the others to catch up.
    const started = Date.now();
    await pingDb(deps.db);
    const now = Date.now();
    if (cutOff || now - started > slowPingMs) {
      cutOff = false;
      quietUntil = now + quietMs;
      deps.log.info({ provider: deps.provider, quietMs }, 'PostgreSQL reachable again; lost pushes are looked for once the workers have recorded what they hold');
      return;
    }
    if (now < quietUntil) return;
    await reconcileOnce(deps);
  };

  const timer = setInterval(() => {
    if (running) return;
    running = pass()
      .then(
        () => {
          failing = false;
        },
        (error) => {
          deps.outage?.saw(error);
          if (isDbUnavailable(error)) cutOff = true;
          if (!failing) deps.log.warn({ err: (error as Error).message }, 'reconcile pass failed; trying again at the next one');
          failing = true;
        },
      )
      .finally(() => {
        running = undefined;
      });
  }, deps.intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
