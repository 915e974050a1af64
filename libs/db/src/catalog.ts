import type { Sql } from './client';

// The bonus catalog: what the CRM can credit (GET /v1/bonuses). Money is bigint minor units.

export interface BonusRow {
  code: string;
  /** The brand the entry is offered in; null: every brand. */
  brandId: string | null;
  label: string;
  type: string;
  product: string;
  amountMinor: bigint;
  currency: string;
  validityDays: number;
  wageringRequirement: string;
  active: boolean;
}

const BONUS_COLUMNS = `code, brand_id::text AS "brandId", label, type, product, amount_minor::text AS "amountMinor", currency, validity_days AS "validityDays",
  wagering_requirement::text AS "wageringRequirement", active`;

function toBonus(row: Omit<BonusRow, 'amountMinor'> & { amountMinor: string }): BonusRow {
  return { ...row, amountMinor: BigInt(row.amountMinor) };
}

/** The entries offered in `brands` (null: every entry): those for every brand and those for one of them. */
export async function listBonuses(sql: Sql, activeOnly: boolean, brands: readonly string[] | null = null): Promise<BonusRow[]> {
  const { rows } = await sql.query(
    `SELECT ${BONUS_COLUMNS} FROM bonuses WHERE (active OR NOT $1) AND ($2::bigint[] IS NULL OR brand_id IS NULL OR brand_id = ANY($2))
      ORDER BY label, code`,
    [activeOnly, brands],
  );
  return rows.map(toBonus);
}

/** The entry of `code` when it is offered in one of `brands` (null: any). */
export async function getBonus(sql: Sql, code: string, brands: readonly string[] | null = null): Promise<BonusRow | undefined> {
  const { rows } = await sql.query(`SELECT ${BONUS_COLUMNS} FROM bonuses WHERE code = $1 AND ($2::bigint[] IS NULL OR brand_id IS NULL OR brand_id = ANY($2))`, [
    code,
    brands,
  ]);
  return rows[0] ? toBonus(rows[0]) : undefined;
}

/**
 * Creates the bonus or replaces its fields, brand included. A code names one entry across brands:
 * an existing entry is replaced only when it is of one of `writable` (null: any), else `taken`.
 */
export async function upsertBonus(sql: Sql, bonus: BonusRow, writable: readonly string[] | null = null): Promise<'created' | 'updated' | 'taken'> {
  const { rows } = await sql.query<{ created: boolean }>(
    `INSERT INTO bonuses (code, label, type, product, amount_minor, currency, validity_days, wagering_requirement, active, brand_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (code) DO UPDATE SET label = EXCLUDED.label, type = EXCLUDED.type, product = EXCLUDED.product,
       amount_minor = EXCLUDED.amount_minor, currency = EXCLUDED.currency, validity_days = EXCLUDED.validity_days,
       wagering_requirement = EXCLUDED.wagering_requirement, active = EXCLUDED.active, brand_id = EXCLUDED.brand_id, updated_at = now()
       WHERE $11::bigint[] IS NULL OR bonuses.brand_id = ANY($11)
     RETURNING (xmax = 0) AS created`,
    [bonus.code, bonus.label, bonus.type, bonus.product, bonus.amountMinor.toString(), bonus.currency, bonus.validityDays, bonus.wageringRequirement, bonus.active, bonus.brandId, writable],
  );
  if (!rows[0]) return 'taken';
  return rows[0].created ? 'created' : 'updated';
}
