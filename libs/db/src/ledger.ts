import type { Sql } from './client';

// The double-entry ledger of the built-in wallet: accounts, their entries and balances.

export interface Leg {
  /** A player id, or "house". */
  owner: string;
  currency: string;
  kind: 'real_money' | 'bonus_money' | 'house';
  amountMinor: bigint;
}

/**
 * Posts legs that sum to zero, all in the accounts of one brand (the house's too). Balances move in
 * the same statement as their entries, so a balance always equals the sum of its entries. A
 * transaction id posted again changes nothing (false).
 */
export async function postTransaction(sql: Sql, brandId: string, transactionId: string, reason: string, legs: Leg[]): Promise<boolean> {
  const sum = legs.reduce((total, leg) => total + leg.amountMinor, 0n);
  if (sum !== 0n) throw new Error(`transaction ${transactionId} does not balance (${sum})`);
  const owners = legs.map((l) => l.owner);
  const currencies = legs.map((l) => l.currency);
  const kinds = legs.map((l) => l.kind);
  await sql.query(
    `INSERT INTO accounts (id, brand_id, owner, currency, kind)
     SELECT gen_random_uuid(), $4, o, c, k FROM unnest($1::text[], $2::text[], $3::text[]) AS a(o, c, k)
     ON CONFLICT (brand_id, owner, currency, kind) DO NOTHING`,
    [owners, currencies, kinds, brandId],
  );
  const { rows } = await sql.query(
    `WITH legs AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[]) AS l(owner, currency, kind, amount)),
          entries AS (
            INSERT INTO ledger_entries (id, transaction_id, account_id, amount_minor, reason, brand_id)
            SELECT gen_random_uuid(), $1::uuid, a.id, l.amount, $6, a.brand_id FROM legs l
              JOIN accounts a ON a.brand_id = $7 AND a.owner = l.owner AND a.currency = l.currency AND a.kind = l.kind
            ORDER BY a.id
            ON CONFLICT (transaction_id, account_id) DO NOTHING
            RETURNING account_id, amount_minor)
     UPDATE accounts a SET balance_minor = a.balance_minor + e.amount_minor FROM entries e WHERE a.id = e.account_id
     RETURNING a.id`,
    [transactionId, owners, currencies, kinds, legs.map((l) => l.amountMinor.toString()), reason, brandId],
  );
  return rows.length > 0;
}

export interface AccountRow {
  brandId: string;
  currency: string;
  kind: string;
  balanceMinor: bigint;
}

/** A player's accounts in `brands` (null: every brand). */
export async function playerAccounts(sql: Sql, brands: readonly string[] | null, userId: string, currency?: string): Promise<AccountRow[]> {
  const { rows } = await sql.query<{ brandId: string; currency: string; kind: string; balanceMinor: string }>(
    `SELECT brand_id::text AS "brandId", currency, kind, balance_minor::text AS "balanceMinor" FROM accounts
      WHERE owner = $1 AND ($2::text IS NULL OR currency = $2) AND ($3::bigint[] IS NULL OR brand_id = ANY($3))
      ORDER BY brand_id, currency, kind`,
    [userId, currency ?? null, brands],
  );
  return rows.map((row) => ({ ...row, balanceMinor: BigInt(row.balanceMinor) }));
}

/** A player's entries in `brands` (null: every brand), newest first. */
export async function playerEntries(sql: Sql, brands: readonly string[] | null, userId: string, limit: number) {
  const { rows } = await sql.query<{ id: string; brandId: string; transactionId: string; currency: string; kind: string; amountMinor: string; reason: string; createdAt: Date }>(
    `SELECT e.id, e.brand_id::text AS "brandId", e.transaction_id AS "transactionId", a.currency, a.kind, e.amount_minor::text AS "amountMinor", e.reason, e.created_at AS "createdAt"
       FROM ledger_entries e JOIN accounts a ON a.id = e.account_id
      WHERE a.owner = $1 AND ($3::bigint[] IS NULL OR a.brand_id = ANY($3)) ORDER BY e.created_at DESC, e.id LIMIT $2`,
    [userId, limit, brands],
  );
  return rows.map((row) => ({ ...row, amountMinor: BigInt(row.amountMinor) }));
}
