import { bonusBrand } from './brand';

describe('bonusBrand', () => {
  it('takes the brand of a credential bound to one brand, whatever BONUS_DEFAULT_BRAND', () => {
    expect(bonusBrand(['2'], 0)).toEqual({ ok: true, brandId: '2' });
  });

  it('takes BONUS_DEFAULT_BRAND for a credential of every brand, or of several that include it', () => {
    expect(bonusBrand(null, 0)).toEqual({ ok: true, brandId: '0' });
    expect(bonusBrand(null, 9007199254740991)).toEqual({ ok: true, brandId: '9007199254740991' });
    expect(bonusBrand(['1', '7'], 7)).toEqual({ ok: true, brandId: '7' });
  });

  it('refuses a credential of several brands without BONUS_DEFAULT_BRAND, naming it', () => {
    expect(bonusBrand(['1', '2'], 0)).toEqual({ ok: false, error: expect.stringMatching(/does not open brand 0 \(BONUS_DEFAULT_BRAND/) });
    expect(bonusBrand([], 0)).toMatchObject({ ok: false });
  });
});
