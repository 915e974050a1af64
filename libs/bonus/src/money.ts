import { MAX_AMOUNT_MINOR } from '@operator/contract';

// Money is exact: amounts travel as decimal text and are kept as integer minor units (bigint),
// never as binary floating point.

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** An ISO 4217 code this runtime knows. */
export function isCurrency(code: unknown): code is string {
  return typeof code === 'string' && /^[A-Z]{3}$/.test(code) && CURRENCIES.has(code);
}

/** Digits after the decimal point of the currency's minor unit (EUR 2, JPY 0, BHD 3). */
export function minorDigits(currency: string): number {
  return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
}

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

export type ParsedAmount = { ok: true; minor: bigint } | { ok: false; error: string };

/** A positive amount in minor units from its decimal text; more decimals than the currency has is an error. */
export function parseAmount(text: string, currency: string): ParsedAmount {
  const match = DECIMAL.exec(text.trim());
  if (!match) return { ok: false, error: 'must be a positive decimal number' };
  const digits = minorDigits(currency);
  const tooLarge = { ok: false as const, error: `must be at most ${formatMinor(MAX_AMOUNT_MINOR, currency)} ${currency}` };
  // Past 18 integer digits it is over the bound whatever the currency; not worth a BigInt of any length.
  if (match[1].replace(/^0+/, '').length > 18) return tooLarge;
  const fraction = (match[2] ?? '').replace(/0+$/, '');
  if (fraction.length > digits) return { ok: false, error: `has more decimals than ${currency} allows (${digits})` };
  const minor = BigInt(match[1]) * 10n ** BigInt(digits) + BigInt(fraction.padEnd(digits, '0') || '0');
  if (minor <= 0n) return { ok: false, error: 'must be greater than zero' };
  if (minor > MAX_AMOUNT_MINOR) return tooLarge;
  return { ok: true, minor };
}

/** Minor units as decimal text in major units: 1050n EUR -> "10.50", 500n JPY -> "500". */
export function formatMinor(minor: bigint, currency: string): string {
  const digits = minorDigits(currency);
  const negative = minor < 0n;
  const text = (negative ? -minor : minor).toString().padStart(digits + 1, '0');
  const whole = digits ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
  return negative ? `-${whole}` : whole;
}
