import type { Sql } from './client';

// The bonus catalog: what the CRM can credit (GET /v1/bonuses). Money is bigint minor units.

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
