import type { LogSink } from '@operator/config';
import type { ProviderName } from '@operator/contract';
import { dropLapsedLeases, inTransaction, takeStrandedPushes, type Db } from '@operator/db';
import { enqueueSendJobs, type PushQueues, type SendJobPolicy } from '@operator/queue';

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
    const pushIds = await takeStrandedPushes(tx, deps.provider, deps.afterMs, deps.leaseMs, deps.limit ?? 5000);
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

/** Runs a pass every `intervalMs` until stopped; a pass that fails (a store is down) is logged and tried at the next one. */
export function startReconciler(deps: ReconcileDeps & { intervalMs: number }): Reconciler {
  let running: Promise<void> | undefined;
  let failing = false;
  const timer = setInterval(() => {
    if (running) return;
    running = reconcileOnce(deps)
      .then(
        () => {
          failing = false;
        },
        (error) => {
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
