import { BIGINT_MAX, MAX_AMOUNT_MINOR, MAX_WAGERING_MULTIPLE } from '@operator/contract';
import { formatMinor, isCurrency, minorDigits, parseAmount } from './money';

describe('parseAmount', () => {
  it.each([
    ['10', 'EUR', 1000n],
    ['10.5', 'EUR', 1050n],
    ['10.50', 'EUR', 1050n],
    ['10.500', 'EUR', 1050n],
    ['0.01', 'EUR', 1n],
    ['500', 'JPY', 500n],
    ['500.0', 'JPY', 500n],
    ['1.234', 'BHD', 1234n],
    ['1.2', 'BHD', 1200n],
    ['1', 'BHD', 1000n],
    ['999999999999', 'EUR', 99999999999900n],
    ['1000000000000', 'EUR', 100000000000000n],
    ['100000000000000', 'JPY', 100000000000000n],
    ['100000000000.000', 'BHD', 100000000000000n],
  ])('%s %s -> %p minor units', (text, currency, minor) => {
    expect(parseAmount(text, currency)).toEqual({ ok: true, minor });
  });

  it.each([
    ['10.505', 'EUR'],
    ['0.001', 'EUR'],
    ['500.5', 'JPY'],
    ['1.2345', 'BHD'],
    ['0', 'EUR'],
    ['0.00', 'EUR'],
    ['0', 'JPY'],
    ['-1', 'EUR'],
    ['1e2', 'EUR'],
    ['abc', 'EUR'],
    ['', 'EUR'],
    ['.5', 'EUR'],
    ['10.', 'EUR'],
    ['1,5', 'EUR'],
    ['+1', 'EUR'],
    ['0x10', 'EUR'],
    ['Infinity', 'EUR'],
    ['NaN', 'EUR'],
    ['1 000', 'EUR'],
  ])('%p %s is an error', (text, currency) => {
    const parsed = parseAmount(text, currency);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toEqual(expect.any(String));
  });

  it('says why: too many decimals names the currency and its digits; zero must be greater than zero', () => {
    expect(parseAmount('10.505', 'EUR')).toEqual({ ok: false, error: expect.stringMatching(/EUR.*2/) });
    expect(parseAmount('500.5', 'JPY')).toEqual({ ok: false, error: expect.stringMatching(/JPY.*0/) });
    expect(parseAmount('0.00', 'EUR')).toEqual({ ok: false, error: expect.stringMatching(/greater than zero/) });
  });

  it('is exact where binary floating point is not (0.1 + 0.2, large amounts)', () => {
    expect(parseAmount('0.3', 'EUR')).toEqual({ ok: true, minor: 30n });
    expect(parseAmount('4.35', 'EUR')).toEqual({ ok: true, minor: 435n });
    expect(parseAmount('123456789012.34', 'EUR')).toEqual({ ok: true, minor: 12345678901234n });
  });

  it('refuses more than the largest amount, in any currency, naming the limit', () => {
    expect(parseAmount('1000000000000.01', 'EUR')).toEqual({ ok: false, error: 'must be at most 1000000000000.00 EUR' });
    expect(parseAmount('999999999999999.99', 'EUR')).toEqual({ ok: false, error: 'must be at most 1000000000000.00 EUR' });
    expect(parseAmount('100000000000001', 'JPY')).toEqual({ ok: false, error: 'must be at most 100000000000000 JPY' });
    expect(parseAmount('100000000000.001', 'BHD')).toEqual({ ok: false, error: 'must be at most 100000000000.000 BHD' });
    // 999999999999999.99 as JSON writes it (a double), and numbers of any length.
    expect(parseAmount('1000000000000000', 'EUR')).toEqual({ ok: false, error: 'must be at most 1000000000000.00 EUR' });
    expect(parseAmount(`1${'0'.repeat(400)}`, 'EUR')).toEqual({ ok: false, error: 'must be at most 1000000000000.00 EUR' });
    expect(parseAmount(`0000000000000000000010.${'0'.repeat(40)}`, 'EUR')).toEqual({ ok: true, minor: 1000n });
  });

  it('bounds amounts so that amount x the largest wagering multiple fits a bigint', () => {
    expect(MAX_AMOUNT_MINOR * BigInt(MAX_WAGERING_MULTIPLE) <= BIGINT_MAX).toBe(true);
    expect(BIGINT_MAX).toBe(9223372036854775807n);
  });
});

describe('formatMinor', () => {
  it.each([
    [1050n, 'EUR', '10.50'],
    [5n, 'EUR', '0.05'],
    [0n, 'EUR', '0.00'],
    [100n, 'EUR', '1.00'],
    [500n, 'JPY', '500'],
    [0n, 'JPY', '0'],
    [1234n, 'BHD', '1.234'],
    [1n, 'BHD', '0.001'],
    [-1050n, 'EUR', '-10.50'],
    [-5n, 'EUR', '-0.05'],
    [-500n, 'JPY', '-500'],
    [-1234n, 'BHD', '-1.234'],
    [12345678901234567n, 'EUR', '123456789012345.67'],
  ])('%p %s -> %p', (minor, currency, text) => {
    expect(formatMinor(minor, currency)).toBe(text);
  });

  it('round-trips with parseAmount', () => {
    for (const [minor, currency] of [
      [1n, 'EUR'],
      [99n, 'EUR'],
      [1000n, 'JPY'],
      [1001n, 'BHD'],
      [123456n, 'USD'],
    ] as const) {
      expect(parseAmount(formatMinor(minor, currency), currency)).toEqual({ ok: true, minor });
    }
  });
});

describe('isCurrency', () => {
  it.each([
    ['EUR', true],
    ['USD', true],
    ['JPY', true],
    ['BHD', true],
    ['eur', false],
    ['Eur', false],
    ['XYZ', false],
    ['EU', false],
    ['EURO', false],
    ['', false],
    [' EUR', false],
    [978, false],
    [null, false],
    [undefined, false],
  ])('%p -> %p', (code, expected) => {
    expect(isCurrency(code)).toBe(expected);
  });
});

describe('minorDigits', () => {
  it.each([
    ['EUR', 2],
    ['USD', 2],
    ['JPY', 0],
    ['KRW', 0],
    ['BHD', 3],
    ['KWD', 3],
  ])('%s has %p', (currency, digits) => {
    expect(minorDigits(currency)).toBe(digits);
  });
});
