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
  /** The send lease: one lapsed this long more is deleted, and the pause after an outage lasts this long by default. */
  leaseMs: number;
  jobMaxMessages: number;
  sendPolicy: SendJobPolicy;
  /** Most deliveries looked at in one pass. */
  limit?: number;
}

/**
 * Redis may lose jobs (a failover, a flushed queue, a job removed after its attempts); PostgreSQL
 * is the truth. One pass enqueues again the pushes of this provider's stranded deliveries, in the
 * transaction that marks them, so two reconcilers never enqueue the same ones and a failed enqueue
 * leaves them to the next pass. A push still queued after all is sent once, under one lease.
 */
export async function reconcileOnce(deps: ReconcileDeps): Promise<string[]> {
  const round = Date.now().toString(36);
  // Leases of workers that died, lapsed for a lease's time more: nothing reads them any more.
  await dropLapsedLeases(deps.db.pool, deps.leaseMs);
  const afterMs = await strandedAfterMs(deps);
  return inTransaction(deps.db, async (tx) => {
    const pushIds = await takeStrandedPushes(tx, deps.provider, afterMs, deps.limit ?? 5000);
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

/** Clock skew allowed between the process that queued a job and PostgreSQL. */
const QUEUED_SKEW_MS = 5000;

/**
 * A queue works its jobs oldest first, so a push accepted after the oldest job still waiting may
 * be waiting behind it, however long a campaign's backlog: only pushes older than that job are
 * looked for, so a backlog is not taken for lost jobs and queued twice.
 */
async function strandedAfterMs(deps: ReconcileDeps): Promise<number> {
  const [oldest] = await deps.queues[deps.provider].getJobs(['wait'], 0, 0, true);
  if (!oldest) return deps.afterMs;
  return Math.max(deps.afterMs, Date.now() - oldest.timestamp + QUEUED_SKEW_MS);
}

export interface Reconciler {
  stop(): Promise<void>;
}

/**
 * Runs a pass every `intervalMs` until stopped; a failed pass is logged and tried at the next one.
 * Once PostgreSQL answers again after an outage, it takes nothing for `quietAfterOutageMs`: the
 * workers cut off with it renew their lapsed leases and write the outcomes they hold first, so a
 * push that was sent is not taken as lost and sent twice.
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
