import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';

// Credits the CRM asked for (bonuses and funds), recorded once and carried out by the bonus app.

export interface CreditRow {
  id: string;
  /** The brand the credit is for (canonical decimal, as BrandSet holds it). */
  brandId: string;
  idempotencyKey: string;
  tupleKey: string | null;
  kind: 'bonus' | 'funds';
  /** Hash of the first request (endpoint and canonical body): a repeat must match it. */
  fingerprint: string;
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

const CREDIT_COLUMNS = `id, brand_id::text AS "brandId", idempotency_key AS "idempotencyKey", tuple_key AS "tupleKey", kind::text AS kind, fingerprint, user_id AS "userId",
  bonus_code AS "bonusCode", amount_minor::text AS "amountMinor", currency, type, request, crm_headers AS "crmHeaders",
  status::text AS status, error, reference, attempts, created_at AS "createdAt", updated_at AS "updatedAt"`;

function toCredit(row: Omit<CreditRow, 'amountMinor'> & { amountMinor: string }): CreditRow {
  return { ...row, amountMinor: BigInt(row.amountMinor) };
}

export type NewCredit = Pick<CreditRow, 'brandId' | 'idempotencyKey' | 'tupleKey' | 'kind' | 'fingerprint' | 'userId' | 'bonusCode' | 'amountMinor' | 'currency' | 'type' | 'crmHeaders'> & {
  /** The body as sent, extra fields included. */
  requestText: string;
};

export type Recorded = { credit: CreditRow; replay: false } | { credit: CreditRow; replay: true; conflict: null | 'key' | 'tuple' };

/**
 * Records a credit once per brand: a repeat under the same X-Service-Id or the same tuple (activity,
 * action, player, trigger hash) in the same brand gets the first credit back; one asking something
 * else is a `conflict`. Another brand's credit under the same key is another credit.
 */
export async function recordCredit(sql: Sql, credit: NewCredit): Promise<Recorded> {
  const id = uuidv7();
  const inserted = await sql.query(
    `INSERT INTO credits (id, idempotency_key, tuple_key, kind, fingerprint, user_id, bonus_code, amount_minor, currency, type, request, crm_headers, brand_id)
     VALUES ($1, $2, $3, $4::"CreditKind", $5, $6, $7, $8, $9, $10, $11::json, $12::jsonb, $13)
     ON CONFLICT DO NOTHING
     RETURNING ${CREDIT_COLUMNS}`,
    [id, credit.idempotencyKey, credit.tupleKey, credit.kind, credit.fingerprint, credit.userId, credit.bonusCode, credit.amountMinor.toString(), credit.currency, credit.type, credit.requestText, JSON.stringify(credit.crmHeaders), credit.brandId],
  );
  if (inserted.rows[0]) return { credit: toCredit(inserted.rows[0]), replay: false };
  // The key's credit and the tuple's may be two: the request must match each.
  const { rows } = await sql.query(
    `SELECT ${CREDIT_COLUMNS} FROM credits WHERE brand_id = $3 AND (idempotency_key = $1 OR ($2::text IS NOT NULL AND tuple_key = $2)) ORDER BY created_at`,
    [credit.idempotencyKey, credit.tupleKey, credit.brandId],
  );
  const found = rows.map(toCredit);
  const other = found.find((row) => row.fingerprint !== credit.fingerprint);
  if (other) return { credit: other, replay: true, conflict: other.idempotencyKey === credit.idempotencyKey ? 'key' : 'tuple' };
  return { credit: found[0], replay: true, conflict: null };
}

/** `brands`: the brands it may be of (null: any). */
export async function getCredit(sql: Sql, id: string, brands: readonly string[] | null = null): Promise<CreditRow | undefined> {
  const { rows } = await sql.query(`SELECT ${CREDIT_COLUMNS} FROM credits WHERE id = $1 AND ($2::bigint[] IS NULL OR brand_id = ANY($2))`, [id, brands]);
  return rows[0] ? toCredit(rows[0]) : undefined;
}

/** `brands`: the brands listed (null: every brand). */
export async function listCredits(sql: Sql, filter: { userId?: string; status?: string; limit: number; brands?: readonly string[] | null }): Promise<CreditRow[]> {
  const { rows } = await sql.query(
    `SELECT ${CREDIT_COLUMNS} FROM credits WHERE ($1::text IS NULL OR user_id = $1) AND ($2::text IS NULL OR status::text = $2)
        AND ($4::bigint[] IS NULL OR brand_id = ANY($4))
      ORDER BY created_at DESC LIMIT $3`,
    [filter.userId ?? null, filter.status ?? null, filter.limit, filter.brands ?? null],
  );
  return rows.map(toCredit);
}

/**
 * Claims due credits for `owner`: only which to look at; holdCreditForPost takes one for its post.
 * Due is compared at next_attempt_at's precision: now() stored there is rounded to the millisecond,
 * up as often as down, and a credit made due a moment ago would otherwise not be due yet.
 */
export async function claimDueCredits(sql: Sql, limit: number, leaseMs: number, owner: string): Promise<CreditRow[]> {
  const { rows } = await sql.query(
    `WITH due AS (SELECT id FROM credits WHERE status = 'accepted' AND next_attempt_at <= now()::timestamptz(3)
                    AND (locked_until IS NULL OR locked_until < now()) ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED),
          claimed AS (UPDATE credits c SET locked_until = now() + $2 * interval '1 millisecond', lease_owner = $3 FROM due WHERE c.id = due.id RETURNING c.id)
     SELECT ${CREDIT_COLUMNS} FROM credits WHERE id IN (SELECT id FROM claimed) ORDER BY created_at`,
    [limit, leaseMs, owner],
  );
  return rows.map(toCredit);
}

/**
 * Takes `credit` for its post; undefined when another owner's lease is live or it changed since it
 * was read. One statement decides, so of two bonus apps only one gets it.
 */
export async function holdCreditForPost(sql: Sql, credit: Pick<CreditRow, 'id' | 'attempts'>, owner: string, leaseMs: number): Promise<CreditRow | undefined> {
  const { rows } = await sql.query(
    `UPDATE credits SET locked_until = now() + $4 * interval '1 millisecond', lease_owner = $2
      WHERE id = $1 AND status = 'accepted' AND attempts = $3
        AND (lease_owner = $2 OR locked_until IS NULL OR locked_until <= now())
      RETURNING ${CREDIT_COLUMNS}`,
    [credit.id, owner, credit.attempts, leaseMs],
  );
  return rows[0] ? toCredit(rows[0]) : undefined;
}

/** Gives back claims on credits `owner` will not post after all. */
export async function releaseCredits(sql: Sql, ids: string[], owner: string): Promise<number> {
  if (!ids.length) return 0;
  const { rowCount } = await sql.query(
    `UPDATE credits SET locked_until = NULL, lease_owner = NULL WHERE id = ANY($1::uuid[]) AND status = 'accepted' AND lease_owner = $2`,
    [ids, owner],
  );
  return rowCount ?? 0;
}

/** False when another worker finished it first. */
export async function lockAcceptedCredit(sql: Sql, id: string): Promise<boolean> {
  const { rows } = await sql.query(`SELECT 1 FROM credits WHERE id = $1 AND status = 'accepted' FOR UPDATE`, [id]);
  return rows.length > 0;
}

/** False when another owner has taken it, or it is finished. */
export async function lockHeldCredit(sql: Sql, id: string, owner: string): Promise<boolean> {
  const { rows } = await sql.query(`SELECT 1 FROM credits WHERE id = $1 AND status = 'accepted' AND lease_owner = $2 FOR UPDATE`, [id, owner]);
  return rows.length > 0;
}

export async function finishCredit(sql: Sql, id: string, outcome: { status: 'completed'; reference: string | null } | { status: 'failed'; error: string }) {
  await sql.query(
    `UPDATE credits SET status = $2::"CreditStatus", reference = $3, error = $4, attempts = attempts + 1, locked_until = NULL, lease_owner = NULL, updated_at = now()
      WHERE id = $1`,
    [id, outcome.status, outcome.status === 'completed' ? outcome.reference : null, outcome.status === 'failed' ? outcome.error.slice(0, 1000) : null],
  );
}

/** False (nothing changed) when `owner` no longer holds it. */
export async function retryCredit(sql: Sql, id: string, nextAttemptAt: Date, error: string, owner: string): Promise<boolean> {
  const { rowCount } = await sql.query(
    `UPDATE credits SET attempts = attempts + 1, next_attempt_at = $2, error = $3, locked_until = NULL, lease_owner = NULL, updated_at = now()
      WHERE id = $1 AND status = 'accepted' AND lease_owner = $4`,
    [id, nextAttemptAt, error.slice(0, 1000), owner],
  );
  return (rowCount ?? 0) > 0;
}
