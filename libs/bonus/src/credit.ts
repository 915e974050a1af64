import { createHash } from 'node:crypto';
import { MAX_AMOUNT_MINOR, MAX_USER_ID_LENGTH, MAX_WAGERING_MULTIPLE, isStorableText, type CrmHeaders } from '@operator/contract';
import type { BonusRow, NewCredit } from '@operator/db';
import { formatMinor, isCurrency, parseAmount } from './money';

export type Prepared = { ok: true; credit: NewCredit } | { ok: false; status: 400 | 404 | 422; error: string };

// Text PostgreSQL cannot store as sent (NUL, a lone surrogate) is a 400 here: a 500 the CRM retries forever.
export const isText = (value: unknown, max = MAX_USER_ID_LENGTH): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= max && isStorableText(value);

/** The amount's decimal text: as the CRM wrote the number (no float on the way), or a string. */
function amountText(raw: string | undefined, parsed: unknown): string | undefined {
  if (typeof parsed === 'string') return parsed;
  if (typeof parsed === 'number' && raw !== undefined) return raw;
  return undefined;
}

/** The contract's uniqueness rule (5.2), hashed so its unique index holds 64 bytes whatever the size. */
export function tupleKey(headers: CrmHeaders, userId: string): string | null {
  const { activity_id, action_id, trigger_hash } = headers;
  if (!activity_id || !action_id || !trigger_hash) return null;
  return createHash('sha256').update(JSON.stringify([activity_id, action_id, userId, trigger_hash]), 'utf8').digest('hex');
}

/** JSON with every object's keys sorted at every depth. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    return `{${Object.keys(object)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Hash of a request's endpoint and canonical body, the amount in minor units (12.5 = "12.50"). */
export function requestFingerprint(kind: NewCredit['kind'], body: Record<string, unknown>, amountMinor: bigint | undefined): string {
  const named = amountMinor === undefined ? body : { ...body, amount: amountMinor.toString() };
  return createHash('sha256').update(canonicalJson([kind, named]), 'utf8').digest('hex');
}

/** Why the ledger could not carry a catalog bonus, or null. */
function uncreditable(bonus: BonusRow, amountMinor: bigint, currency: string): string | null {
  if (amountMinor > MAX_AMOUNT_MINOR) return `bonus ${bonus.code} is over the largest amount a credit may have (${formatMinor(MAX_AMOUNT_MINOR, currency)} ${currency})`;
  if (!(Number(bonus.wageringRequirement) <= MAX_WAGERING_MULTIPLE)) return `bonus ${bonus.code} has a wagering requirement over ${MAX_WAGERING_MULTIPLE}`;
  return null;
}

interface Common {
  body: Record<string, unknown>;
  text: string;
  /** The raw JSON text of `amount`, when it was a number. */
  rawAmount: string | undefined;
  headers: CrmHeaders;
  idempotencyKey: string;
  /** The brand the credit is for (the route's: the credential's one brand, or BONUS_DEFAULT_BRAND). */
  brandId: string;
}

function amountOf(input: Common, currency: string): { ok: true; minor: bigint } | { ok: false; status: 400; error: string } {
  const text = amountText(input.rawAmount, input.body.amount);
  if (text === undefined) return { ok: false, status: 400, error: 'amount must be a number greater than zero' };
  const parsed = parseAmount(text, currency);
  return parsed.ok ? parsed : { ok: false, status: 400, error: `amount ${parsed.error}` };
}

/** POST /bonus/credit: a catalog bonus; `amount` and `currency` in the request override the catalog's. */
export function prepareBonusCredit(input: Common, bonus: BonusRow | undefined): Prepared {
  const { body } = input;
  if (!isText(body.user_id)) return { ok: false, status: 400, error: 'user_id is required (a string)' };
  if (!isText(body.bonus_code, 128)) return { ok: false, status: 400, error: 'bonus_code is required (a string)' };
  if (body.currency !== undefined && body.currency !== null && !isCurrency(body.currency)) {
    return { ok: false, status: 400, error: 'currency must be an ISO 4217 code' };
  }
  if (!bonus) return { ok: false, status: 404, error: `unknown bonus code ${body.bonus_code}` };
  if (!bonus.active) return { ok: false, status: 422, error: `bonus ${bonus.code} is not active` };
  const currency = (typeof body.currency === 'string' ? body.currency : undefined) ?? bonus.currency;
  let amountMinor = bonus.amountMinor;
  let namedMinor: bigint | undefined;
  if (body.amount !== undefined && body.amount !== null) {
    const amount = amountOf(input, currency);
    if (!amount.ok) return amount;
    amountMinor = namedMinor = amount.minor;
  } else if (currency !== bonus.currency) {
    return { ok: false, status: 400, error: `bonus ${bonus.code} is in ${bonus.currency}; give amount with another currency` };
  }
  const problem = uncreditable(bonus, amountMinor, currency);
  if (problem) return { ok: false, status: 422, error: problem };
  return {
    ok: true,
    credit: {
      brandId: input.brandId,
      idempotencyKey: input.idempotencyKey,
      tupleKey: tupleKey(input.headers, body.user_id),
      kind: 'bonus',
      fingerprint: requestFingerprint('bonus', body, namedMinor),
      userId: body.user_id,
      bonusCode: bonus.code,
      amountMinor,
      currency,
      type: bonus.type,
      crmHeaders: input.headers as Record<string, string>,
      requestText: input.text,
    },
  };
}

/** POST /bonus/credit/funds: money straight to the wallet (cashback by default). */
export function prepareFundsCredit(input: Common): Prepared {
  const { body } = input;
  if (!isText(body.user_id)) return { ok: false, status: 400, error: 'user_id is required (a string)' };
  if (!isCurrency(body.currency)) return { ok: false, status: 400, error: 'currency must be an ISO 4217 code (like EUR)' };
  if (body.bonus_code !== undefined && body.bonus_code !== null && !isText(body.bonus_code, 128)) {
    return { ok: false, status: 400, error: 'bonus_code must be a string' };
  }
  if (body.type !== undefined && body.type !== null && !isText(body.type, 64)) return { ok: false, status: 400, error: 'type must be a string' };
  const amount = amountOf(input, body.currency);
  if (!amount.ok) return amount;
  return {
    ok: true,
    credit: {
      brandId: input.brandId,
      idempotencyKey: input.idempotencyKey,
      tupleKey: tupleKey(input.headers, body.user_id),
      kind: 'funds',
      fingerprint: requestFingerprint('funds', body, amount.minor),
      userId: body.user_id,
      bonusCode: typeof body.bonus_code === 'string' ? body.bonus_code : null,
      amountMinor: amount.minor,
      currency: body.currency,
      type: typeof body.type === 'string' ? body.type : 'cashback',
      crmHeaders: input.headers as Record<string, string>,
      requestText: input.text,
    },
  };
}
