import { ordinal } from './secrets';

/**
 * The brands a credential opens, as canonical decimal ids (activity.brand_id, 0 to 2^53-1); null:
 * every brand, as an entry without `@` does.
 */
export type BrandSet = readonly string[] | null;

/** An API key with the brands it opens. */
export interface BoundKey {
  key: string;
  brands: BrandSet;
}

/** The text after an entry's last `@`, when it is made of digits and `+` only, is its brand list. */
const BRAND_LIST = /^(.*)@([\d+]*)$/s;

/** The canonical id of a brand, or undefined when the text is not one (0 to 2^53-1, digits only). */
export function brandIdOf(text: string): string | undefined {
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const id = Number(text);
  return Number.isSafeInteger(id) ? String(id) : undefined;
}

/**
 * Splits `KEY@7+8` into the key and its brands. A secret may hold `@`: only a tail of digits and
 * `+` is read as brands, and then it must be well formed (`KEY@`, `KEY@7+` and `KEY@+8` are refused).
 */
export function boundEntry(name: string, entry: string, index: number, problems: string[]): BoundKey | undefined {
  const match = BRAND_LIST.exec(entry);
  if (!match) return { key: entry, brands: null };
  const ids = match[2].split('+').map(brandIdOf);
  if (match[1] === '' || ids.some((id) => id === undefined)) {
    problems.push(`${name}: the ${ordinal(index)} entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)`);
    return undefined;
  }
  return { key: match[1], brands: [...new Set(ids as string[])].sort((a, b) => Number(a) - Number(b)) };
}

/** Every entry of a list, bound or not; malformed ones are reported and dropped. */
export function boundList(name: string, entries: string[], problems: string[]): BoundKey[] {
  return entries.flatMap((entry, index) => boundEntry(name, entry, index, problems) ?? []);
}

/** Whether a credential with `brands` opens `brandId`. */
export function opensBrand(brands: BrandSet, brandId: string | number | bigint): boolean {
  return brands === null || brands.includes(String(brandId));
}

/** Why a credential of `brands` may not act on `brandId` (every route says it alike), or undefined when it may. */
export function brandRefusal(brands: BrandSet, brandId: string | number | bigint): string | undefined {
  return opensBrand(brands, brandId) ? undefined : `this credential does not open brand ${brandId}`;
}

/** The brands two sets both open (an OAuth token's and its client's now). */
export function commonBrands(a: BrandSet, b: BrandSet): BrandSet {
  if (a === null) return b;
  if (b === null) return a;
  return a.filter((id) => b.includes(id));
}
