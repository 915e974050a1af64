import type { PushRequest } from '@operator/contract';
import { claimDeliveries, type Claim, type ClaimedDelivery, type ClaimedMessage, type Db } from '@operator/db';
import type { ProviderName } from '@operator/contract';
import type { PushProvider, SendError, SendResult, SendTarget } from '@operator/providers';
import { errorReason, type LogSink } from '@operator/config';
import { countSends, countSuppressions, NO_ERROR_CODE, observeSendDuration } from '@operator/metrics';
import { playerKey, type ComplianceGate, type Player, type SuppressionReason, type Verdict } from '@operator/compliance';
import type { OutageClock } from './outage';
import type { SendOutcome, SendRecorder } from './outcomes';
import { trackingToken } from './tracking';

export interface SendDeps {
  db: Db;
  provider: ProviderName;
  /** The provider client for a brand (one long-lived client per credential). */
  providerFor(brandId: string): PushProvider;
  log: LogSink;
  /** Records each device's outcome as soon as the provider answers, and keeps the job's lease alive meanwhile. */
  recorder: SendRecorder;
  /** How long a job's send lease lasts unrenewed; past it, a crashed worker's pushes are taken again. */
  leaseMs: number;
  /** How long a job waits for its messages to become visible (the gateway adds jobs just before commit). */
  visibilityGraceMs: number;
  /** Messages of one job sent at the same time. */
  parallelMessages: number;
  /** Key of each push's tracking token. */
  trackingSecret: string;
  /** PUSH_RETRY_AFTER_MAX_MS: a provider's Retry-After delays a retry by this much at most. */
  retryAfterMaxMs: number;
  /** When this process last found PostgreSQL out of reach: for a lease's time after, lapsed leases still hold. */
  outage?: OutageClock;
  /** The responsible-gambling gate (COMPLIANCE_URL): asked once per job for its players before any provider call. */
  compliance?: SendCompliance;
  /** The brand label of the suppression metric: a brand the configuration names, else other. */
  brandLabel?: (brandId: string) => string;
}

export interface SendCompliance {
  gate: ComplianceGate;
  /** COMPLIANCE_MAX_WAIT: how long after acceptance a push whose player cannot be checked waits before it fails. */
  maxWaitMs: number;
}

/** The least and most a job waits before asking again about players the operator's endpoint did not answer for. */
export const UNVERIFIED_WAIT_MS = { min: 1000, max: 60000 };

/** When a push was accepted: the time in its UUIDv7 id (ms since epoch), now for an id of another version. */
export function pushIdTime(id: string): number {
  if (id.length !== 36 || id[14] !== '7') return Date.now();
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

/** The wait before asking again about a push that waited `waitedMs` for its player's check: a tenth of it, in bounds. */
export function unverifiedWaitMs(waitedMs: number): number {
  return Math.min(UNVERIFIED_WAIT_MS.max, Math.max(UNVERIFIED_WAIT_MS.min, Math.round(waitedMs / 10)));
}

export interface SendJobContext {
  pushIds: string[];
  /** 1 for the first run of the job. */
  attempt: number;
  maxAttempts: number;
  /** When the job was added (ms since epoch). */
  enqueuedAt: number;
}

/**
 * What the queue should do with the job (expected conditions are values): `done`, every claimed
 * delivery final; `retry` after at least delayMs (the longest Retry-After, capped), for the
 * deliveries that failed transiently; `wait`, not ready yet (not committed, held by another job).
 * Nothing pauses the queue: what waits is the device, origin or credential an answer is about.
 */
export type SendJobOutcome =
  | { kind: 'done'; sent: number; failed: number; dropped: number }
  | { kind: 'retry'; reason: string; delayMs: number }
  | { kind: 'wait'; reason: string; delayMs: number };

function target(delivery: ClaimedDelivery): SendTarget {
  return { deliveryId: delivery.id, token: delivery.token!, platform: delivery.platform, p256dh: delivery.p256dh, auth: delivery.auth };
}

/**
 * One provider call in the metrics: each device's result (sent, or the error's class and code), and
 * the call's time under its outcome (sent when every device was, else the first failure's class).
 */
function observeCall(provider: ProviderName, results: SendResult[], seconds: number) {
  let outcome = 'sent';
  for (const result of results) {
    if (result.ok) countSends(provider, 'sent', NO_ERROR_CODE);
    else {
      countSends(provider, result.error.class, result.error.code);
      if (outcome === 'sent') outcome = result.error.class;
    }
  }
  observeSendDuration(provider, outcome, seconds);
}

/** The least wait before the job's next attempt: the longest Retry-After, each cut to `maxMs` (any Web Push endpoint may ask). */
function retryDelayMs(errors: SendError[], maxMs: number): number {
  return Math.max(0, ...errors.map((error) => Math.min(error.retryAfterMs ?? 0, maxMs)));
}

async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/**
 * Sends one job's pushes to this provider's devices under a send lease (claimDeliveries), recording
 * each outcome as its provider answers; the job ends once every outcome is in PostgreSQL. Only
 * pending deliveries are sent, so a job run again never resends a recorded send. Dead tokens
 * deactivate their device, payload errors fail the delivery, transient ones (429s too) leave it
 * pending until the last attempt, and refused credentials stop the job.
 */
export async function processSendJob(deps: SendDeps, job: SendJobContext): Promise<SendJobOutcome> {
  const { db, outage } = deps;
  const lapsedGraceMs = outage && outage.sinceLast() < deps.leaseMs ? deps.leaseMs : 0;
  let claim: Claim;
  try {
    claim = await claimDeliveries(db.pool, job.pushIds, deps.provider, deps.leaseMs, lapsedGraceMs);
  } catch (error) {
    outage?.saw(error);
    throw error;
  }
  deps.recorder.hold(
    claim.leaseId,
    claim.deliveries.map((delivery) => delivery.id),
  );
  try {
    return await sendClaimed(deps, job, claim);
  } finally {
    // Every outcome is in PostgreSQL (or given up): the pushes are free for any job.
    await deps.recorder.finish(claim.leaseId);
  }
}

async function sendClaimed(deps: SendDeps, job: SendJobContext, claim: Claim): Promise<SendJobOutcome> {
  const { log } = deps;
  // The gateway adds a job just before its transaction commits: pushes not visible yet are looked
  // for again after a moment (the job runs again; what it sent now is not claimed twice). Past the
  // grace they were rolled back, and are dropped.
  const { missing } = claim;
  const notYetVisible = missing.length > 0 && Date.now() - job.enqueuedAt < deps.visibilityGraceMs;
  if (missing.length && !notYetVisible) log.warn({ pushIds: missing }, 'dropping pushes that were never committed');
  const lastAttempt = job.attempt >= job.maxAttempts;
  const recorded: Promise<void>[] = [];
  let sent = 0;
  let failed = 0;
  let deadDevices = 0;
  const transient: SendError[] = [];
  let authFailure: SendError | undefined;

  const keep = (outcomes: SendOutcome[]) => {
    for (const { outcome } of outcomes) {
      if (outcome.status === 'sent') sent++;
      else if (outcome.status === 'failed') failed++;
    }
    recorded.push(deps.recorder.record(outcomes));
  };

  const byMessage = new Map<string, ClaimedDelivery[]>();
  const inactive: SendOutcome[] = [];
  for (const delivery of claim.deliveries) {
    if (!delivery.token || !delivery.deviceActive) {
      inactive.push({
        pushId: delivery.messageId,
        outcome: { deliveryId: delivery.id, status: 'failed', errorCode: 'device-inactive', error: 'the device was removed or deactivated' },
      });
      continue;
    }
    const list = byMessage.get(delivery.messageId);
    if (list) list.push(delivery);
    else byMessage.set(delivery.messageId, [delivery]);
  }
  keep(inactive);
  // Pushes whose player the operator's records could not answer for: not sent, the job waits.
  const unverified = { waitMs: undefined as number | undefined, pushes: 0, error: undefined as string | undefined };
  // The gate is asked once per player in a job, whatever its pushes and devices.
  const verdicts = new Map<string, Promise<Verdict>>();

  const outcomeOf = (delivery: ClaimedDelivery, result: SendResult): SendOutcome => {
    const pushId = delivery.messageId;
    if (result.ok) return { pushId, outcome: { deliveryId: delivery.id, status: 'sent', providerMessageId: result.providerMessageId } };
    const { error } = result;
    // Every deferral uses an attempt, a 429's too, and the delivery's own tries count (a job enqueued
    // again starts at attempt 1): no delivery is retried for ever.
    const final = error.class === 'dead-token' || error.class === 'payload' || lastAttempt || delivery.attempts >= job.maxAttempts;
    if (error.class === 'transient' && !final) transient.push(error);
    if (error.class === 'auth') authFailure ??= error;
    const outcome: SendOutcome = { pushId, outcome: { deliveryId: delivery.id, status: final ? 'failed' : 'pending', errorCode: error.code, error: error.message } };
    if (error.class === 'dead-token') {
      outcome.deadDevice = { id: delivery.deviceId!, reason: error.code };
      deadDevices++;
    }
    return outcome;
  };

  await eachLimited([...byMessage], deps.parallelMessages, async ([messageId, deliveries]) => {
    const message = claim.messages.get(messageId)!;
    // Just before the provider call, each push as soon as its player's answer is in: lookups and
    // sends overlap. A player not allowed is not sent to; one not answered for waits.
    if (deps.compliance) {
      const gated = await gateMessage(deps, deps.compliance, verdicts, messageId, message, deliveries);
      if (gated.kind === 'suppressed') return keep(gated.outcomes);
      if (gated.kind === 'wait') {
        unverified.waitMs = Math.min(unverified.waitMs ?? gated.delayMs, gated.delayMs);
        unverified.pushes++;
        unverified.error ??= gated.error;
        return;
      }
    }
    if (authFailure) {
      // Credentials were refused: do not try them on more devices; these wait for the next attempt.
      keep(deliveries.map((delivery) => outcomeOf(delivery, { ok: false, error: authFailure! })));
      return;
    }
    let results: SendResult[];
    const started = performance.now();
    try {
      const provider = deps.providerFor(message.brandId);
      const notification = { pushId: messageId, request: message.payload as PushRequest, trackingToken: trackingToken(deps.trackingSecret, messageId) };
      results = await provider.send(notification, deliveries.map(target));
    } catch (error) {
      const reason = errorReason(error);
      log.error({ err: error, pushId: messageId }, 'provider failed unexpectedly');
      results = deliveries.map(() => ({ ok: false, error: { class: 'transient', code: 'unavailable', message: reason } }));
    }
    observeCall(deps.provider, results, (performance.now() - started) / 1000);
    keep(deliveries.map((delivery, i) => outcomeOf(delivery, results[i])));
  });

  await Promise.all(recorded);
  if (deadDevices) log.info({ devices: deadDevices }, 'deactivated devices with dead tokens');
  if (unverified.pushes) log.warn({ pushes: unverified.pushes, retryInMs: unverified.waitMs, reason: unverified.error }, 'players could not be checked; their pushes wait');
  const unverifiedWait = unverified.waitMs;

  if (authFailure && !lastAttempt) {
    log.error({ provider: deps.provider, code: authFailure.code, reason: authFailure.message }, 'provider refused our credentials; check the configuration');
    return { kind: 'retry', reason: `credentials refused: ${authFailure.message}`, delayMs: 0 };
  }
  if (transient.length && !lastAttempt) {
    return { kind: 'retry', reason: transient[0].message, delayMs: retryDelayMs(transient, deps.retryAfterMaxMs) };
  }
  if (unverifiedWait !== undefined) {
    return { kind: 'wait', reason: 'players not verified yet', delayMs: notYetVisible ? Math.min(200, unverifiedWait) : unverifiedWait };
  }
  if (notYetVisible) return { kind: 'wait', reason: 'messages not committed yet', delayMs: 200 };
  if (claim.heldElsewhere > 0) {
    return { kind: 'wait', reason: 'pushes held by another job', delayMs: Math.ceil(deps.leaseMs / 2) };
  }
  return { kind: 'done', sent, failed, dropped: missing.length };
}

const SUPPRESSED_BECAUSE: Record<SuppressionReason, string> = {
  excluded: 'the player is self-excluded (the operator\'s records)',
  blocked: 'the player is blocked (the operator\'s records)',
  'no-consent': 'the player has not opted in to push notifications (the operator\'s records)',
  unverified: 'the operator\'s records did not answer for the player within COMPLIANCE_MAX_WAIT',
};

async function verdictOf(deps: SendDeps, gate: ComplianceGate, player: Player): Promise<Verdict> {
  try {
    return (await gate.check([player])).get(playerKey(player)) ?? { kind: 'unverified', error: 'no verdict for the player' };
  } catch (error) {
    deps.log.error({ err: error }, 'the compliance gate failed unexpectedly; the player counts as unverified');
    return { kind: 'unverified', error: errorReason(error) };
  }
}

type Gated =
  | { kind: 'allowed' }
  | { kind: 'suppressed'; outcomes: SendOutcome[] }
  | { kind: 'wait'; delayMs: number; error: string };

/**
 * What the gate says of one push's player (a player asked about by several pushes is looked up once:
 * the gate shares lookups and caches answers): a suppressed push fails each delivery with
 * `suppressed:<reason>` (its devices stay active); an unverified one stays pending, with the wait
 * before asking again, or fails `suppressed:unverified` once COMPLIANCE_MAX_WAIT since its
 * acceptance has passed.
 */
async function gateMessage(
  deps: SendDeps,
  compliance: SendCompliance,
  verdicts: Map<string, Promise<Verdict>>,
  messageId: string,
  message: ClaimedMessage,
  deliveries: ClaimedDelivery[],
): Promise<Gated> {
  const player: Player = { brandId: message.brandId, userId: (message.payload as PushRequest).activity.user_id };
  const key = playerKey(player);
  let asking = verdicts.get(key);
  if (!asking) verdicts.set(key, (asking = verdictOf(deps, compliance.gate, player)));
  const verdict = await asking;
  if (verdict.kind === 'allowed') return verdict;
  let reason: SuppressionReason;
  if (verdict.kind === 'suppressed') reason = verdict.reason;
  else {
    const waitedMs = Date.now() - pushIdTime(messageId);
    const leftMs = compliance.maxWaitMs - waitedMs;
    // Not recorded: the deliveries stay pending for the job's next run, which uses no attempt.
    if (leftMs > 0) return { kind: 'wait', delayMs: Math.min(unverifiedWaitMs(waitedMs), Math.max(leftMs, UNVERIFIED_WAIT_MS.min)), error: verdict.error };
    reason = 'unverified';
  }
  countSuppressions(deps.provider, reason, deps.brandLabel ? deps.brandLabel(player.brandId) : 'other');
  return {
    kind: 'suppressed',
    outcomes: deliveries.map((delivery) => ({
      pushId: messageId,
      outcome: { deliveryId: delivery.id, status: 'failed', errorCode: `suppressed:${reason}`, error: SUPPRESSED_BECAUSE[reason] },
    })),
  };
}
