import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import {
  claimDueCredits,
  dueForExpiry,
  finishCredit,
  getBonus,
  getCredit,
  holdCreditForPost,
  inTransaction,
  insertEvent,
  insertPlayerBonus,
  isDbUnavailable,
  lockAcceptedCredit,
  lockHeldCredit,
  lockPlayerBonus,
  playerAccounts,
  postTransaction,
  releaseCredits,
  retryCredit,
  setPlayerBonusStatus,
  untilStored,
  type CreditRow,
  type Db,
  type PlayerBonusRow,
  type Sql,
} from '@operator/db';
import { canMove, EXPIRING_BONUS_STATUSES, FINAL_BONUS_STATUSES, TURNED_REAL_STATUSES } from './catalog';
import { BALANCE_TOPIC, BONUS_TOPIC, balanceEventBody, bonusEventBody, type EventSettings } from './events';
import type { Wallet } from './wallet';
import { backoffMs, type LogSink } from '@operator/config';

export interface BonusDeps {
  db: Db;
  wallet: Wallet;
  events: EventSettings;
  log: LogSink;
  maxAttempts: number;
  backoffMs: number;
  /** How long a claimed credit stays this worker's before it is taken for its post. */
  leaseMs: number;
  /** credits.lease_owner: one per bonus app process. */
  owner: string;
  /** Credits of a round carried out at once. */
  concurrency: number;
  /** Room a post's lease keeps at each end: for the statement that takes it and a late event loop. */
  postMarginMs: number;
}

const HOUSE = 'house';

/**
 * The ordering key of a player's wallet in a brand: the same player id in another brand is another
 * wallet. Brand 0's is the bare player id, the key 1.0.0 writes, so events in flight across an
 * upgrade stay in order.
 */
export const balanceOrderingKey = (brandId: string, userId: string) => (brandId === '0' ? `balance:${userId}` : `balance:${brandId}:${userId}`);

async function writeBalanceEvent(sql: Sql, deps: BonusDeps, brandId: string, userId: string, currency: string) {
  const accounts = await playerAccounts(sql, [brandId], userId, currency);
  await insertEvent(sql, {
    topic: BALANCE_TOPIC,
    orderingKey: balanceOrderingKey(brandId, userId),
    status: 'balance',
    body: balanceEventBody(userId, currency, accounts, deps.events),
    brandId,
  });
}

async function writeBonusEvent(sql: Sql, deps: BonusDeps, bonus: PlayerBonusRow, status: string, crmHeaders: Record<string, string>, bonusTurnedReal?: bigint) {
  await insertEvent(sql, {
    topic: BONUS_TOPIC,
    orderingKey: `bonus:${bonus.id}`,
    status,
    body: bonusEventBody(bonus, status, { crmHeaders }, deps.events, { bonusTurnedReal }),
    brandId: bonus.brandId,
  });
}

/** Finishes a carried-out credit in one transaction, under the credit's row lock, so it is finished once. */
async function complete(deps: BonusDeps, credit: CreditRow, reference: string | null): Promise<void> {
  const bonus = credit.kind === 'bonus' && credit.bonusCode ? await getBonus(deps.db.pool, credit.bonusCode, [credit.brandId]) : undefined;
  await inTransaction(deps.db, async (sql) => {
    if (!(await lockAcceptedCredit(sql, credit.id))) return;
    const moneyKind = credit.kind === 'bonus' ? 'bonus_money' : 'real_money';
    if (deps.wallet.postsToLedger) {
      await postTransaction(sql, credit.brandId, credit.id, credit.kind === 'bonus' ? 'bonus-credit' : `funds-${credit.type}`, [
        { owner: HOUSE, currency: credit.currency, kind: 'house', amountMinor: -credit.amountMinor },
        { owner: credit.userId, currency: credit.currency, kind: moneyKind, amountMinor: credit.amountMinor },
      ]);
    }
    if (credit.kind === 'bonus') {
      const validityDays = bonus?.validityDays ?? 30;
      const wagering = Number(bonus?.wageringRequirement ?? '0');
      const playerBonus = await insertPlayerBonus(sql, {
        id: randomUUID(),
        creditId: credit.id,
        brandId: credit.brandId,
        userId: credit.userId,
        bonusCode: credit.bonusCode!,
        type: bonus?.type ?? 'Undefined',
        product: bonus?.product ?? 'Casino',
        amountMinor: credit.amountMinor,
        currency: credit.currency,
        requiredWageringMinor: (credit.amountMinor * BigInt(Math.round(wagering * 100))) / 100n,
        status: 'Created',
        expiresAt: new Date(Date.now() + validityDays * 86400000),
      });
      await writeBonusEvent(sql, deps, playerBonus, 'Created', credit.crmHeaders);
    }
    if (deps.wallet.postsToLedger) await writeBalanceEvent(sql, deps, credit.brandId, credit.userId, credit.currency);
    await finishCredit(sql, credit.id, { status: 'completed', reference });
  });
}

async function notCarriedOut(deps: BonusDeps, credit: CreditRow, retry: boolean, error: string): Promise<'retry' | 'failed'> {
  const attempt = credit.attempts + 1;
  if (retry && attempt < deps.maxAttempts) {
    const putOff = await untilStored(() => retryCredit(deps.db.pool, credit.id, new Date(Date.now() + backoffMs(attempt, deps.backoffMs)), error, deps.owner), deps.log, 'a credit retry');
    if (putOff) deps.log.warn({ creditId: credit.id, attempt, reason: error }, 'credit not carried out yet; retrying later');
    else deps.log.warn({ creditId: credit.id, reason: error }, 'credit not carried out, and no longer held: its holder records it');
    return 'retry';
  }
  // Failed only while held: another holder may be carrying it out.
  const failed = await untilStored(
    () =>
      inTransaction(deps.db, async (sql) => {
        if (!(await lockHeldCredit(sql, credit.id, deps.owner))) return false;
        await finishCredit(sql, credit.id, { status: 'failed', error });
        return true;
      }),
    deps.log,
    'a failed credit',
  );
  if (failed) deps.log.error({ creditId: credit.id, attempt, reason: error }, 'credit failed for good');
  else deps.log.warn({ creditId: credit.id, reason: error }, 'credit refused, and no longer held: its holder records it');
  return 'failed';
}

/** The longest post (the wallet's two deadlines) and a margin at each end, so the post ends inside its lease. */
export const postLeaseMs = (deps: BonusDeps) => 2 * deps.wallet.timeoutMs + 2 * deps.postMarginMs;

/**
 * Carries out one accepted credit. The post's deadline counts from the hold, so it ends inside the
 * lease; a carried-out credit's completion is retried in memory, never redone.
 */
export async function processCredit(deps: BonusDeps, read: CreditRow): Promise<'completed' | 'retry' | 'failed' | 'skipped'> {
  const leaseMs = postLeaseMs(deps);
  const sentAt = Date.now();
  const credit = await holdCreditForPost(deps.db.pool, read, deps.owner, leaseMs);
  if (!credit) return 'skipped';
  // A hold that took most of the margin leaves too little for a fair try: given back, untried.
  const timeoutMs = Math.min(deps.wallet.timeoutMs, Math.floor((sentAt + leaseMs - deps.postMarginMs - Date.now()) / 2));
  if (timeoutMs < deps.wallet.timeoutMs / 2) {
    await releaseCredits(deps.db.pool, [credit.id], deps.owner);
    deps.log.warn({ creditId: credit.id, timeoutMs }, 'credit not posted: too little of its lease was left');
    return 'skipped';
  }
  const result = await deps.wallet.carryOut(credit, timeoutMs);
  if (!result.ok) return notCarriedOut(deps, credit, result.retry, result.error);
  try {
    await untilStored(() => complete(deps, credit, result.reference), deps.log, 'a carried-out credit');
    return 'completed';
  } catch (error) {
    deps.log.error({ err: error, creditId: credit.id }, 'credit carried out but could not be recorded');
    return notCarriedOut(deps, credit, true, `could not be recorded: ${(error as Error).message}`);
  }
}

/**
 * One round: the due credits, `deps.concurrency` at a time, then the expired bonuses. `held` is
 * what shutdown gives back; a credit leaves it before its post, so a post in flight never is.
 */
export async function runBonusRound(deps: BonusDeps, batch = 50, held = new Set<string>()): Promise<number> {
  const credits = await claimDueCredits(deps.db.pool, batch, deps.leaseMs, deps.owner);
  for (const credit of credits) held.add(credit.id);
  const limit = pLimit(Math.max(1, deps.concurrency));
  await Promise.all(
    credits.map((credit) =>
      limit(async () => {
        // Not held any more: given back at shutdown.
        if (!held.delete(credit.id)) return;
        try {
          await processCredit(deps, credit);
        } catch (error) {
          // Only an outage gets here (a wallet call that throws is a bug, also retried after the lease).
          const level = isDbUnavailable(error) ? 'warn' : 'error';
          deps.log[level]({ err: error, creditId: credit.id }, 'credit not processed; it is retried after its lease');
        }
      }),
    ),
  );
  await expireDueBonuses(deps, batch);
  return credits.length;
}

export type StatusChange = { ok: true; changed: boolean; bonus: PlayerBonusRow } | { ok: false; error: 'not-found' | 'not-allowed'; from?: string };

/**
 * Moves a player's bonus to another status and reports it; final statuses settle the bonus money.
 * `brands`: the brands the caller opens (null: every brand); another brand's bonus is not found.
 */
export async function changeBonusStatus(deps: BonusDeps, bonusId: string, status: string, userId?: string, brands: readonly string[] | null = null): Promise<StatusChange> {
  return inTransaction(deps.db, async (sql) => {
    const bonus = await lockPlayerBonus(sql, bonusId);
    if (!bonus || (userId !== undefined && bonus.userId !== userId) || (brands !== null && !brands.includes(bonus.brandId))) return { ok: false, error: 'not-found' };
    if (bonus.status === status) return { ok: true, changed: false, bonus };
    if (!canMove(bonus.status, status)) return { ok: false, error: 'not-allowed', from: bonus.status };
    await setPlayerBonusStatus(sql, bonus.id, status);
    let turnedReal: bigint | undefined;
    if (FINAL_BONUS_STATUSES.has(status) && deps.wallet.postsToLedger) {
      const [account] = (await playerAccounts(sql, [bonus.brandId], bonus.userId, bonus.currency)).filter((a) => a.kind === 'bonus_money');
      const amount = account ? (account.balanceMinor < bonus.amountMinor ? account.balanceMinor : bonus.amountMinor) : 0n;
      if (amount > 0n) {
        const keep = TURNED_REAL_STATUSES.has(status);
        await postTransaction(sql, bonus.brandId, randomUUID(), keep ? 'bonus-turned-real' : `bonus-${status.toLowerCase()}`, [
          { owner: bonus.userId, currency: bonus.currency, kind: 'bonus_money', amountMinor: -amount },
          keep
            ? { owner: bonus.userId, currency: bonus.currency, kind: 'real_money', amountMinor: amount }
            : { owner: HOUSE, currency: bonus.currency, kind: 'house', amountMinor: amount },
        ]);
        if (keep) turnedReal = amount;
      }
    }
    const credit = await getCredit(sql, bonus.creditId);
    const moved = { ...bonus, status };
    await writeBonusEvent(sql, deps, moved, status, credit?.crmHeaders ?? {}, turnedReal);
    if (FINAL_BONUS_STATUSES.has(status) && deps.wallet.postsToLedger) await writeBalanceEvent(sql, deps, bonus.brandId, bonus.userId, bonus.currency);
    return { ok: true, changed: true, bonus: moved };
  });
}

export async function expireDueBonuses(deps: BonusDeps, limit = 100): Promise<number> {
  const due = await dueForExpiry(deps.db.pool, EXPIRING_BONUS_STATUSES, limit);
  let expired = 0;
  for (const id of due) {
    const change = await changeBonusStatus(deps, id, 'Expired');
    if (change.ok && change.changed) expired++;
  }
  if (expired) deps.log.info({ expired }, 'bonuses expired');
  return expired;
}
