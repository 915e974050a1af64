import {
  createWriteBehind,
  deactivateDevices,
  dropLeases,
  inTransaction,
  lockMessages,
  renewLeases,
  settleMessages,
  writeOutcomes,
  type Db,
  type DeliveryOutcome,
} from '@operator/db';
import type { LogSink } from '@operator/config';
import type { OutageClock } from './outage';

/** What one device's send came to. */
export interface SendOutcome {
  outcome: DeliveryOutcome;
  pushId: string;
  /** The device, when the provider declared its token dead. */
  deadDevice?: { id: string; reason: string };
}

export interface SendRecorderOptions {
  db: Db;
  log: LogSink;
  /** The send lease: leases held here are renewed three times per lease. */
  leaseMs: number;
  /** PUSH_RECORD_INTERVAL_MS: an outcome is written at most this long after the first one waiting. */
  flushMs?: number;
  /** Told of the writes and renewals that found PostgreSQL out of reach. */
  outage?: OutageClock;
}

/**
 * The worker's record of its sends: the answers of all its jobs, gathered for at most `flushMs`,
 * are written in one transaction with the settlements and status events they cause. Held and
 * retried while PostgreSQL cannot take them, with the jobs' send leases renewed meanwhile (a lapsed
 * one is brought back within a second of PostgreSQL answering). After a crash only the sends in
 * flight and the answers of the last `flushMs` can go out again.
 */
export interface SendRecorder {
  /** A job's lease and the deliveries it claimed: the lease is renewed until the job ends. */
  hold(leaseId: string | null, deliveryIds: string[]): void;
  /** Resolves once the outcomes are in PostgreSQL. */
  record(outcomes: SendOutcome[]): Promise<void>;
  /** The job ended (its outcomes recorded, or given up): its lease is dropped, its pushes free for any job. */
  finish(leaseId: string | null): Promise<void>;
  /** Deliveries claimed whose outcome is not in PostgreSQL yet. */
  readonly held: number;
  /**
   * Gives back the leases of jobs with no outcome waiting to be written (shutdown past its
   * deadline): their pushes are free for any worker at once. The others lapse.
   */
  release(): Promise<number>;
  /** Waits for every outcome to be recorded, then stops renewing leases. */
  close(): Promise<void>;
}

/**
 * Writes of outcomes in flight at once, so answers that come during a slow write go out on their
 * own connection and a killed worker leaves about one interval unrecorded. At most 3 and half the
 * pool, so claims and lease renewals keep connections.
 */
function recordWrites(db: Db): number {
  return Math.min(3, Math.max(1, Math.floor((db.pool.options.max ?? 10) / 2)));
}

export function createSendRecorder({ db, log, leaseMs, flushMs = 100, outage }: SendRecorderOptions): SendRecorder {
  /** Claimed deliveries whose outcome is not in PostgreSQL yet. */
  const held = new Set<string>();
  /** Of those, the ones with no outcome at all yet (not sent, or in flight). */
  const unanswered = new Set<string>();
  /** Live leases of this worker's jobs, with their deliveries. */
  const leases = new Map<string, Set<string>>();

  const writer = createWriteBehind<SendOutcome>({
    what: 'send outcomes',
    log,
    flushMs,
    maxWriting: recordWrites(db),
    // Held sends are written within a second of PostgreSQL coming back (see the renewals below).
    retryMaxMs: 1000,
    async write(items) {
      await inTransaction(db, async (tx) => {
        const { toSettle } = await writeOutcomes(
          tx,
          items.map((item) => item.outcome),
          items.map((item) => item.pushId),
        );
        await deactivateDevices(
          tx,
          items.flatMap((item) => (item.deadDevice ? [item.deadDevice] : [])),
        );
        // Locked before they are tallied: of two writers recording deliveries of one push (its FCM
        // and APNs devices, say), the second waits for the first to commit, then counts both.
        await settleMessages(tx, await lockMessages(tx, toSettle));
      }).catch((error: unknown) => {
        outage?.saw(error);
        throw error;
      });
      for (const item of items) held.delete(item.outcome.deliveryId);
    },
  });

  // Every lease's third; after a failed renewal, every second until one goes through, so a lease
  // that lapsed in an outage is live again before a reconciler may take its pushes as lost.
  const renewEveryMs = Math.max(100, Math.floor(leaseMs / 3));
  const retryRenewMs = Math.min(1000, renewEveryMs);
  let renewFailing = false;
  let renewTimer: NodeJS.Timeout | undefined;
  let closed = false;
  const renewLater = (delayMs: number) => {
    if (closed) return;
    renewTimer = setTimeout(() => {
      if (!leases.size) return renewLater(renewEveryMs);
      renewLeases(db.pool, [...leases.keys()], leaseMs).then(
        () => {
          if (renewFailing) log.info({ leases: leases.size }, 'renewed the send leases held during the outage');
          renewFailing = false;
          renewLater(renewEveryMs);
        },
        (error) => {
          outage?.saw(error);
          if (!renewFailing) log.warn({ err: (error as Error).message, leases: leases.size }, 'could not renew send leases yet; retrying');
          renewFailing = true;
          renewLater(retryRenewMs);
        },
      );
    }, delayMs);
  };
  renewLater(renewEveryMs);

  const forget = (leaseId: string) => {
    for (const id of leases.get(leaseId) ?? []) {
      held.delete(id);
      unanswered.delete(id);
    }
    leases.delete(leaseId);
  };

  return {
    hold(leaseId, deliveryIds) {
      if (!leaseId) return;
      leases.set(leaseId, new Set(deliveryIds));
      for (const id of deliveryIds) {
        held.add(id);
        unanswered.add(id);
      }
    },
    record(outcomes) {
      for (const { outcome } of outcomes) unanswered.delete(outcome.deliveryId);
      const written = writer.add(outcomes).catch((error: unknown) => {
        // Given up (a write that keeps failing, not an outage): no longer held; the job ends with
        // this error and drops its lease, so the reconciler takes these deliveries again.
        for (const { outcome } of outcomes) held.delete(outcome.deliveryId);
        throw error;
      });
      // No send of any job is waiting for its answer: every job is waiting for this write, and
      // nothing would join it in the rest of the interval.
      if (!unanswered.size) writer.flushNow();
      return written;
    },
    async finish(leaseId) {
      if (!leaseId || !leases.has(leaseId)) return;
      forget(leaseId);
      // Not dropped (PostgreSQL down): it lapses, and the pushes it names, all recorded, are free then.
      await dropLeases(db.pool, [leaseId]).catch((error) => log.warn({ err: (error as Error).message }, 'could not drop a send lease; it will lapse'));
    },
    get held() {
      return held.size;
    },
    async release() {
      const free = [...leases].filter(([, ids]) => [...ids].every((id) => !held.has(id) || unanswered.has(id))).map(([leaseId]) => leaseId);
      const released = await dropLeases(db.pool, free);
      for (const leaseId of free) forget(leaseId);
      return released;
    },
    async close() {
      await writer.drain();
      closed = true;
      clearTimeout(renewTimer);
    },
  };
}
