import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';

// Catalog, credits, the double-entry ledger and players' bonuses. Money is bigint minor units.

export interface BonusRow {
  code: string;
  label: string;
  type: string;
  product: string;
  amountMinor: bigint;
  currency: string;
  validityDays: number;
  wageringRequirement: string;
  active: boolean;
}

const BONUS_COLUMNS = `code, label, type, product, amount_minor::text AS "amountMinor", currency, validity_days AS "validityDays",
  wagering_requirement::text AS "wageringRequirement", active`;

function toBonus(row: Omit<BonusRow, 'amountMinor'> & { amountMinor: string }): BonusRow {
  return { ...row, amountMinor: BigInt(row.amountMinor) };
}

export async function listBonuses(sql: Sql, activeOnly: boolean): Promise<BonusRow[]> {
  const { rows } = await sql.query(`SELECT ${BONUS_COLUMNS} FROM bonuses WHERE active OR NOT $1 ORDER BY label, code`, [activeOnly]);
  return rows.map(toBonus);
}

export async function getBonus(sql: Sql, code: string): Promise<BonusRow | undefined> {
  const { rows } = await sql.query(`SELECT ${BONUS_COLUMNS} FROM bonuses WHERE code = $1`, [code]);
  return rows[0] ? toBonus(rows[0]) : undefined;
}

/** Creates the bonus or replaces its fields; answers whether it was new. */
export async function upsertBonus(sql: Sql, bonus: BonusRow): Promise<boolean> {
  const { rows } = await sql.query<{ created: boolean }>(
    `INSERT INTO bonuses (code, label, type, product, amount_minor, currency, validity_days, wagering_requirement, active)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (code) DO UPDATE SET label = EXCLUDED.label, type = EXCLUDED.type, product = EXCLUDED.product,
       amount_minor = EXCLUDED.amount_minor, currency = EXCLUDED.currency, validity_days = EXCLUDED.validity_days,
       wagering_requirement = EXCLUDED.wagering_requirement, active = EXCLUDED.active, updated_at = now()
     RETURNING (xmax = 0) AS created`,
    [bonus.code, bonus.label, bonus.type, bonus.product, bonus.amountMinor.toString(), bonus.currency, bonus.validityDays, bonus.wageringRequirement, bonus.active],
  );
  return rows[0].created;
}

export interface CreditRow {
  id: string;
  idempotencyKey: string;
  tupleKey: string | null;
  kind: 'bonus' | 'funds';
  userId: string;
  bonusCode: string | null;
  amountMinor: bigint;
  currency: string;
  type: string;
  request: unknown;
  crmHeaders: Record<string, string>;
  status: 'accepted' | 'completed' | 'failed';
  error: string | null;
  reference: string | null;
  attempts: number;
  createdAt: Date;
  updatedAt: Date;
}

const CREDIT_COLUMNS = `id, idempotency_key AS "idempotencyKey", tuple_key AS "tupleKey", kind::text AS kind, user_id AS "userId",
  bonus_code AS "bonusCode", amount_minor::text AS "amountMinor", currency, type, request, crm_headers AS "crmHeaders",
  status::text AS status, error, reference, attempts, created_at AS "createdAt", updated_at AS "updatedAt"`;

function toCredit(row: Omit<CreditRow, 'amountMinor'> & { amountMinor: string }): CreditRow {
  return { ...row, amountMinor: BigInt(row.amountMinor) };
}

export type NewCredit = Pick<CreditRow, 'idempotencyKey' | 'tupleKey' | 'kind' | 'userId' | 'bonusCode' | 'amountMinor' | 'currency' | 'type' | 'crmHeaders'> & {
  /** The request body as sent (JSON text), extra fields included. */
  requestText: string;
};

/**
 * Records a credit once: a second request with the same X-Service-Id, or the same activity,
 * action, player and trigger hash, gets the first credit back (`replay`), also when they race.
 */
export async function recordCredit(sql: Sql, credit: NewCredit): Promise<{ credit: CreditRow; replay: boolean }> {
  const id = uuidv7();
  const inserted = await sql.query(
    `INSERT INTO credits (id, idempotency_key, tuple_key, kind, user_id, bonus_code, amount_minor, currency, type, request, crm_headers)
     VALUES ($1, $2, $3, $4::"CreditKind", $5, $6, $7, $8, $9, $10::json, $11::jsonb)
     ON CONFLICT DO NOTHING
     RETURNING ${CREDIT_COLUMNS}`,
    [id, credit.idempotencyKey, credit.tupleKey, credit.kind, credit.userId, credit.bonusCode, credit.amountMinor.toString(), credit.currency, credit.type, credit.requestText, JSON.stringify(credit.crmHeaders)],
  );
  if (inserted.rows[0]) return { credit: toCredit(inserted.rows[0]), replay: false };
  const { rows } = await sql.query(
    `SELECT ${CREDIT_COLUMNS} FROM credits WHERE idempotency_key = $1 OR ($2::text IS NOT NULL AND tuple_key = $2) ORDER BY created_at LIMIT 1`,
    [credit.idempotencyKey, credit.tupleKey],
  );
  return { credit: toCredit(rows[0]), replay: true };
}

export async function getCredit(sql: Sql, id: string): Promise<CreditRow | undefined> {
  const { rows } = await sql.query(`SELECT ${CREDIT_COLUMNS} FROM credits WHERE id = $1`, [id]);
  return rows[0] ? toCredit(rows[0]) : undefined;
}

export async function listCredits(sql: Sql, filter: { userId?: string; status?: string; limit: number }): Promise<CreditRow[]> {
  const { rows } = await sql.query(
    `SELECT ${CREDIT_COLUMNS} FROM credits WHERE ($1::text IS NULL OR user_id = $1) AND ($2::text IS NULL OR status::text = $2)
      ORDER BY created_at DESC LIMIT $3`,
    [filter.userId ?? null, filter.status ?? null, filter.limit],
  );
  return rows.map(toCredit);
}

/** Takes accepted credits that are due, for this worker, until `leaseMs` passes. */
export async function claimDueCredits(sql: Sql, limit: number, leaseMs: number): Promise<CreditRow[]> {
  const { rows } = await sql.query(
    `WITH due AS (SELECT id FROM credits WHERE status = 'accepted' AND next_attempt_at <= now()
                    AND (locked_until IS NULL OR locked_until < now()) ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED),
          claimed AS (UPDATE credits c SET locked_until = now() + $2 * interval '1 millisecond' FROM due WHERE c.id = due.id RETURNING c.id)
     SELECT ${CREDIT_COLUMNS} FROM credits WHERE id IN (SELECT id FROM claimed) ORDER BY created_at`,
    [limit, leaseMs],
  );
  return rows.map(toCredit);
}

/** Gives back this worker's claims on credits it will not process after all (shutdown). */
export async function releaseCredits(sql: Sql, ids: string[]): Promise<number> {
  if (!ids.length) return 0;
  const { rowCount } = await sql.query(`UPDATE credits SET locked_until = NULL WHERE id = ANY($1::uuid[]) AND status = 'accepted'`, [ids]);
  return rowCount ?? 0;
}

/** Locks an accepted credit for finishing it; undefined when another worker finished it first. */
export async function lockAcceptedCredit(sql: Sql, id: string): Promise<boolean> {
  const { rows } = await sql.query(`SELECT 1 FROM credits WHERE id = $1 AND status = 'accepted' FOR UPDATE`, [id]);
  return rows.length > 0;
}

export async function finishCredit(sql: Sql, id: string, outcome: { status: 'completed'; reference: string | null } | { status: 'failed'; error: string }) {
  await sql.query(
    `UPDATE credits SET status = $2::"CreditStatus", reference = $3, error = $4, attempts = attempts + 1, locked_until = NULL, updated_at = now()
      WHERE id = $1`,
    [id, outcome.status, outcome.status === 'completed' ? outcome.reference : null, outcome.status === 'failed' ? outcome.error.slice(0, 1000) : null],
  );
}

export async function retryCredit(sql: Sql, id: string, nextAttemptAt: Date, error: string) {
  await sql.query(
    `UPDATE credits SET attempts = attempts + 1, next_attempt_at = $2, error = $3, locked_until = NULL, updated_at = now()
      WHERE id = $1 AND status = 'accepted'`,
    [id, nextAttemptAt, error.slice(0, 1000)],
  );
}

export interface Leg {
  /** A player id, or "house". */
  owner: string;
  currency: string;
  kind: 'real_money' | 'bonus_money' | 'house';
  amountMinor: bigint;
}

/**
 * Posts one double-entry transaction: its legs must sum to zero. Each account's balance moves in
 * the same statement as its entry, so a balance always equals the sum of its entries. Posting the
 * same transaction id again changes nothing (answers false).
 */
export async function postTransaction(sql: Sql, transactionId: string, reason: string, legs: Leg[]): Promise<boolean> {
  const sum = legs.reduce((total, leg) => total + leg.amountMinor, 0n);
  if (sum !== 0n) throw new Error(`transaction ${transactionId} does not balance (${sum})`);
  const owners = legs.map((l) => l.owner);
  const currencies = legs.map((l) => l.currency);
  const kinds = legs.map((l) => l.kind);
  await sql.query(
    `INSERT INTO accounts (id, owner, currency, kind)
     SELECT gen_random_uuid(), o, c, k FROM unnest($1::text[], $2::text[], $3::text[]) AS a(o, c, k)
     ON CONFLICT (owner, currency, kind) DO NOTHING`,
    [owners, currencies, kinds],
  );
  const { rows } = await sql.query(
    `WITH legs AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[]) AS l(owner, currency, kind, amount)),
          entries AS (
            INSERT INTO ledger_entries (id, transaction_id, account_id, amount_minor, reason)
            SELECT gen_random_uuid(), $1::uuid, a.id, l.amount, $6 FROM legs l
              JOIN accounts a ON a.owner = l.owner AND a.currency = l.currency AND a.kind = l.kind
            ORDER BY a.id
            ON CONFLICT (transaction_id, account_id) DO NOTHING
            RETURNING account_id, amount_minor)
     UPDATE accounts a SET balance_minor = a.balance_minor + e.amount_minor FROM entries e WHERE a.id = e.account_id
     RETURNING a.id`,
    [transactionId, owners, currencies, kinds, legs.map((l) => l.amountMinor.toString()), reason],
  );
  return rows.length > 0;
}

export interface AccountRow {
  currency: string;
  kind: string;
  balanceMinor: bigint;
}

export async function playerAccounts(sql: Sql, userId: string, currency?: string): Promise<AccountRow[]> {
  const { rows } = await sql.query<{ currency: string; kind: string; balanceMinor: string }>(
    `SELECT currency, kind, balance_minor::text AS "balanceMinor" FROM accounts
      WHERE owner = $1 AND ($2::text IS NULL OR currency = $2) ORDER BY currency, kind`,
    [userId, currency ?? null],
  );
  return rows.map((row) => ({ ...row, balanceMinor: BigInt(row.balanceMinor) }));
}

export async function playerEntries(sql: Sql, userId: string, limit: number) {
  const { rows } = await sql.query<{ id: string; transactionId: string; currency: string; kind: string; amountMinor: string; reason: string; createdAt: Date }>(
    `SELECT e.id, e.transaction_id AS "transactionId", a.currency, a.kind, e.amount_minor::text AS "amountMinor", e.reason, e.created_at AS "createdAt"
       FROM ledger_entries e JOIN accounts a ON a.id = e.account_id
      WHERE a.owner = $1 ORDER BY e.created_at DESC, e.id LIMIT $2`,
    [userId, limit],
  );
  return rows.map((row) => ({ ...row, amountMinor: BigInt(row.amountMinor) }));
}

export interface PlayerBonusRow {
  id: string;
  creditId: string;
  userId: string;
  bonusCode: string;
  type: string;
  product: string;
  amountMinor: bigint;
  currency: string;
  requiredWageringMinor: bigint;
  status: string;
  expiresAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

const PLAYER_BONUS_COLUMNS = `id, credit_id AS "creditId", user_id AS "userId", bonus_code AS "bonusCode", type, product,
  amount_minor::text AS "amountMinor", currency, required_wagering_minor::text AS "requiredWageringMinor", status,
  expires_at AS "expiresAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

function toPlayerBonus(row: Record<string, unknown>): PlayerBonusRow {
  return { ...(row as unknown as PlayerBonusRow), amountMinor: BigInt(row.amountMinor as string), requiredWageringMinor: BigInt(row.requiredWageringMinor as string) };
}

export async function insertPlayerBonus(sql: Sql, bonus: Omit<PlayerBonusRow, 'createdAt' | 'updatedAt'>): Promise<PlayerBonusRow> {
  const { rows } = await sql.query(
    `INSERT INTO player_bonuses (id, credit_id, user_id, bonus_code, type, product, amount_minor, currency, required_wagering_minor, status, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${PLAYER_BONUS_COLUMNS}`,
    [bonus.id, bonus.creditId, bonus.userId, bonus.bonusCode, bonus.type, bonus.product, bonus.amountMinor.toString(), bonus.currency,
      bonus.requiredWageringMinor.toString(), bonus.status, bonus.expiresAt],
  );
  return toPlayerBonus(rows[0]);
}

export async function listPlayerBonuses(sql: Sql, userId: string): Promise<PlayerBonusRow[]> {
  const { rows } = await sql.query(`SELECT ${PLAYER_BONUS_COLUMNS} FROM player_bonuses WHERE user_id = $1 ORDER BY created_at`, [userId]);
  return rows.map(toPlayerBonus);
}

/** Locks a player's bonus for a status change. */
export async function lockPlayerBonus(sql: Sql, id: string): Promise<PlayerBonusRow | undefined> {
  const { rows } = await sql.query(`SELECT ${PLAYER_BONUS_COLUMNS} FROM player_bonuses WHERE id = $1 FOR UPDATE`, [id]);
  return rows[0] ? toPlayerBonus(rows[0]) : undefined;
}

export async function setPlayerBonusStatus(sql: Sql, id: string, status: string): Promise<void> {
  await sql.query(`UPDATE player_bonuses SET status = $2, updated_at = now() WHERE id = $1`, [id, status]);
}

/** Ids of live bonuses past their validity, oldest first. */
export async function dueForExpiry(sql: Sql, limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(
    `SELECT id FROM player_bonuses WHERE status IN ('Pending', 'Created', 'Ongoing') AND expires_at <= now() ORDER BY expires_at LIMIT $1`,
    [limit],
  );
  return rows.map((row) => row.id);
}

/** An outbox event whose body is fixed now (bonus and balance events). */
export async function insertEvent(sql: Sql, event: { topic: string; orderingKey: string; status: string; body: string }): Promise<string> {
  const id = uuidv7();
  await sql.query(`INSERT INTO events (id, topic, ordering_key, status, body) VALUES ($1, $2, $3, $4, $5::json)`, [id, event.topic, event.orderingKey, event.status, event.body]);
  return id;
}
