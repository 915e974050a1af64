import type { Sql } from './client';

// The bonuses players hold, and their statuses (the moves allowed are @operator/bonus's rule).

export interface PlayerBonusRow {
  id: string;
  creditId: string;
  /** Its credit's brand. */
  brandId: string;
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

const PLAYER_BONUS_COLUMNS = `id, credit_id AS "creditId", brand_id::text AS "brandId", user_id AS "userId", bonus_code AS "bonusCode", type, product,
  amount_minor::text AS "amountMinor", currency, required_wagering_minor::text AS "requiredWageringMinor", status,
  expires_at AS "expiresAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

function toPlayerBonus(row: Record<string, unknown>): PlayerBonusRow {
  return { ...(row as unknown as PlayerBonusRow), amountMinor: BigInt(row.amountMinor as string), requiredWageringMinor: BigInt(row.requiredWageringMinor as string) };
}

export async function insertPlayerBonus(sql: Sql, bonus: Omit<PlayerBonusRow, 'createdAt' | 'updatedAt'>): Promise<PlayerBonusRow> {
  const { rows } = await sql.query(
    `INSERT INTO player_bonuses (id, credit_id, user_id, bonus_code, type, product, amount_minor, currency, required_wagering_minor, status, expires_at, brand_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING ${PLAYER_BONUS_COLUMNS}`,
    [bonus.id, bonus.creditId, bonus.userId, bonus.bonusCode, bonus.type, bonus.product, bonus.amountMinor.toString(), bonus.currency,
      bonus.requiredWageringMinor.toString(), bonus.status, bonus.expiresAt, bonus.brandId],
  );
  return toPlayerBonus(rows[0]);
}

/** A player's bonuses in `brands` (null: every brand). */
export async function listPlayerBonuses(sql: Sql, brands: readonly string[] | null, userId: string): Promise<PlayerBonusRow[]> {
  const { rows } = await sql.query(
    `SELECT ${PLAYER_BONUS_COLUMNS} FROM player_bonuses WHERE user_id = $1 AND ($2::bigint[] IS NULL OR brand_id = ANY($2)) ORDER BY created_at`,
    [userId, brands],
  );
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

/** Ids of bonuses in one of `statuses` past their validity, oldest first. */
export async function dueForExpiry(sql: Sql, statuses: readonly string[], limit: number): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(
    `SELECT id FROM player_bonuses WHERE status = ANY($1::text[]) AND expires_at <= now() ORDER BY expires_at LIMIT $2`,
    [statuses, limit],
  );
  return rows.map((row) => row.id);
}
