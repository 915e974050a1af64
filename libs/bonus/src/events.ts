import type { AccountRow, CreditRow, PlayerBonusRow } from '@operator/db';
import { formatMinor } from './money';

export const BONUS_TOPIC = 'bonus';
export const BALANCE_TOPIC = 'balance';

export interface EventSettings {
  /** The CRM's header word: the references object is `<word>_references` (service_references). */
  headerWord: string;
  origin: string;
  /** Rate of each currency to the CRM's base currency; 1 when not listed. */
  exchangeRates: Record<string, number>;
}

/** A decimal amount written into JSON as a number, digit for digit. */
class Decimal {
  constructor(readonly text: string) {}
}

function json(value: object): string {
  const marks: string[] = [];
  const text = JSON.stringify(value, (_key, item) => {
    if (item instanceof Decimal) {
      marks.push(item.text);
      return `\u0000decimal${marks.length - 1}\u0000`;
    }
    return item;
  });
  return text.replace(/"\\u0000decimal(\d+)\\u0000"/g, (_match, index) => marks[Number(index)]);
}

const NUMERIC = /^\d{1,15}$/;

/** The CRM's request headers, as the bonus event's references: ids as integers, the rest as sent. */
export function references(headers: Record<string, string>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [field, value] of Object.entries(headers)) {
    out[field] = field !== 'id' && field !== 'trigger_hash' && NUMERIC.test(value) ? Number(value) : value;
  }
  return out;
}

/** A bonus status event (POST {crm}/v1/integration/bonus), with every field the CRM requires. */
export function bonusEventBody(
  bonus: PlayerBonusRow,
  status: string,
  credit: Pick<CreditRow, 'crmHeaders'>,
  settings: EventSettings,
  extra: { bonusTurnedReal?: bigint; at?: Date } = {},
): string {
  return json({
    amount: new Decimal(formatMinor(bonus.amountMinor, bonus.currency)),
    bonus_id: bonus.bonusCode,
    currency: bonus.currency,
    exchange_rate: settings.exchangeRates[bonus.currency] ?? 1,
    origin: settings.origin,
    user_bonus_id: bonus.id,
    user_id: bonus.userId,
    product: bonus.product,
    status,
    timestamp: (extra.at ?? new Date()).toISOString(),
    type: bonus.type,
    bonus_code: bonus.bonusCode,
    required_wagering_amount: new Decimal(formatMinor(bonus.requiredWageringMinor, bonus.currency)),
    ...(extra.bonusTurnedReal === undefined ? {} : { bonus_turned_real: new Decimal(formatMinor(extra.bonusTurnedReal, bonus.currency)) }),
    [`${settings.headerWord.toLowerCase()}_references`]: references(credit.crmHeaders),
  });
}

/** A wallet change (POST {crm}/v1/integration/user/balances): real and bonus money of one currency. */
export function balanceEventBody(userId: string, currency: string, accounts: AccountRow[], settings: EventSettings, at = new Date()): string {
  const balance = (kind: string) => accounts.find((a) => a.currency === currency && a.kind === kind)?.balanceMinor ?? 0n;
  return json({
    balances: ['real_money', 'bonus_money'].map((key) => ({
      amount: new Decimal(formatMinor(balance(key), currency)),
      currency,
      key,
      exchange_rate: settings.exchangeRates[currency] ?? 1,
    })),
    origin: settings.origin,
    timestamp: at.toISOString(),
    user_id: userId,
  });
}
