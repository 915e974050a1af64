import {
  createWriteBehind,
  deactivateDevices,
  extendClaims,
  inTransaction,
  lockMessages,
  recordOutcomes,
  releaseClaims,
  settleMessages,
  type Db,
  type DeliveryOutcome,
} from '@operator/db';
import type { LogSink } from '@operator/config';

/** What one device's send came to, with what recording it touches. */
export interface SendOutcome {
  outcome: DeliveryOutcome;
  pushId: string;
  /** The push's only delivery: its message is settled without being locked first (see lockMessages). */
  alone: boolean;
  /** The device, when the provider declared its token dead. */
  deadDevice?: { id: string; reason: string };
}

export interface SendRecorderOptions {
  db: Db;
  log: LogSink;
  /** The claim lease: claims held here are renewed three times per lease. */
  leaseMs: number;
  /** How long outcomes are gathered before one write. */
  flushMs?: number;
}

/**
 * The worker's record of its sends. Outcomes are written as the provider answers (a few
 * milliseconds' worth at a time, with the message settlements and status events they cause), not
 * once per job; when PostgreSQL cannot take them they are held and retried, and the claims on
 * those deliveries are renewed meanwhile, so a claim never lapses on a delivery this worker sent.
 * After a crash, only the sends in flight at that instant can go out again.
 */
export interface SendRecorder {
  /** Deliveries this worker claimed: their claims are renewed until their outcome is recorded. */
  hold(deliveryIds: string[]): void;
  /** Resolves once the outcomes are in PostgreSQL. */
  record(outcomes: SendOutcome[]): Promise<void>;
  /** Claims held right now. */
  readonly held: number;
  /** Gives back the claims on deliveries with no outcome yet (shutdown past its deadline). */
  release(): Promise<number>;
  /** Waits for every outcome to be recorded, then stops renewing claims. */
  close(): Promise<void>;
}

export function createSendRecorder({ db, log, leaseMs, flushMs = 5 }: SendRecorderOptions): SendRecorder {
  /** Claimed deliveries whose outcome is not in PostgreSQL yet. */
  const held = new Set<string>();
  /** Of those, the ones with no outcome at all yet (not sent, or in flight). */
  const unanswered = new Set<string>();

  const writer = createWriteBehind<SendOutcome>({
    what: 'send outcomes',
    log,
    flushMs,
    async write(items) {
      await inTransaction(db, async (tx) => {
        await recordOutcomes(
          tx,
          items.map((item) => item.outcome),
          items.map((item) => item.pushId),
        );
        await deactivateDevices(
          tx,
          items.flatMap((item) => (item.deadDevice ? [item.deadDevice] : [])),
        );
        // Locked before they are tallied: of two writers recording deliveries of the same push (its
        // FCM and APNs devices, say), the second waits for the first to commit, then counts both.
        // Unlocked, each could see the other's delivery still being sent, and neither settle it.
        const locked = await lockMessages(tx, [...new Set(items.flatMap((item) => (item.alone ? [] : [item.pushId])))]);
        await settleMessages(tx, [...locked, ...new Set(items.flatMap((item) => (item.alone ? [item.pushId] : [])))]);
      });
      for (const item of items) held.delete(item.outcome.deliveryId);
    },
  });

  let renewing = false;
  const renew = setInterval(
    () => {
      if (renewing || !held.size) return;
      renewing = true;
      extendClaims(db.pool, [...held])
        .catch((error) => log.warn({ err: (error as Error).message, claims: held.size }, 'could not renew claims yet; retrying'))
        .finally(() => {
          renewing = false;
        });
    },
    Math.max(100, Math.floor(leaseMs / 3)),
  );

  return {
    hold(deliveryIds) {
      for (const id of deliveryIds) {
        held.add(id);
        unanswered.add(id);
      }
    },
    record(outcomes) {
      for (const { outcome } of outcomes) unanswered.delete(outcome.deliveryId);
      return writer.add(outcomes).catch((error: unknown) => {
        // Given up (a write that keeps failing, not an outage): no longer held, so the claims lapse
        // and the reconciler takes these deliveries again, rather than this worker renewing claims
        // on sends it will never record.
        for (const { outcome } of outcomes) held.delete(outcome.deliveryId);
        throw error;
      });
    },
    get held() {
      return held.size;
    },
    async release() {
      const ids = [...unanswered];
      const released = await releaseClaims(db.pool, ids);
      for (const id of ids) {
        unanswered.delete(id);
        held.delete(id);
      }
      return released;
    },
    async close() {
      await writer.drain();
      clearInterval(renew);
    },
  };
}
