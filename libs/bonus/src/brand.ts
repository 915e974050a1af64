import { brandRefusal, type BrandSet } from '@operator/config';

export type BrandChoice = { ok: true; brandId: string } | { ok: false; error: string };

/**
 * The brand a bonus request is for: the credential's when it opens exactly one, otherwise
 * BONUS_DEFAULT_BRAND, which the credential must open.
 */
export function bonusBrand(brands: BrandSet, defaultBrand: number | string): BrandChoice {
  if (brands !== null && brands.length === 1) return { ok: true, brandId: brands[0] };
  const brandId = String(defaultBrand);
  const refused = brandRefusal(brands, brandId);
  if (!refused) return { ok: true, brandId };
  return { ok: false, error: `${refused} (BONUS_DEFAULT_BRAND, the brand of a bonus request whose credential opens several brands)` };
}
