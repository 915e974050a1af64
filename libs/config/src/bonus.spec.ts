import { configErrorOf } from '@operator/testing';
import { loadBonusAppConfig } from './bonus';

describe('BONUS_DEFAULT_BRAND', () => {
  it('is brand 0 when unset, and takes any brand id up to 2^53-1', () => {
    expect(loadBonusAppConfig({}).BONUS_DEFAULT_BRAND).toBe(0);
    expect(loadBonusAppConfig({ BONUS_DEFAULT_BRAND: '7' }).BONUS_DEFAULT_BRAND).toBe(7);
    expect(loadBonusAppConfig({ BONUS_DEFAULT_BRAND: '9007199254740991' }).BONUS_DEFAULT_BRAND).toBe(9007199254740991);
  });

  it.each(['-1', '9007199254740992', '1.5', 'seven'])('refuses %s, naming the variable', (value) => {
    const { problems } = configErrorOf(() => loadBonusAppConfig({ BONUS_DEFAULT_BRAND: value }));
    expect(problems).toEqual([expect.stringContaining('BONUS_DEFAULT_BRAND')]);
  });
});
