import { backoffMs } from './backoff';

describe('backoffMs', () => {
  const samples = (attempt: number, base: number, max: number, retryAfter?: number) =>
    Array.from({ length: 200 }, () => backoffMs(attempt, base, max, retryAfter));

  it('lies between half and all of the ceiling, base * 2^(attempt-1)', () => {
    for (const [attempt, ceiling] of [
      [1, 100],
      [2, 200],
      [3, 400],
      [4, 800],
    ]) {
      const values = samples(attempt, 100, 60_000);
      expect(Math.min(...values)).toBeGreaterThanOrEqual(ceiling / 2);
      expect(Math.max(...values)).toBeLessThanOrEqual(ceiling);
    }
  });

  it('is jittered', () => {
    expect(new Set(samples(5, 1000, 60_000)).size).toBeGreaterThan(10);
  });

  it('treats attempt 0 as the first', () => {
    for (const value of samples(0, 100, 60_000)) {
      expect(value).toBeGreaterThanOrEqual(50);
      expect(value).toBeLessThanOrEqual(100);
    }
  });

  it('is capped by the maximum, however many attempts', () => {
    for (const attempt of [8, 20, 100, 5000]) {
      for (const value of samples(attempt, 100, 3000)) {
        expect(value).toBeGreaterThanOrEqual(1500);
        expect(value).toBeLessThanOrEqual(3000);
      }
    }
  });

  it('is never sooner than the other side’s Retry-After', () => {
    for (const value of samples(1, 100, 3000, 5000)) expect(value).toBe(5000);
    for (const value of samples(4, 100, 3000, 100)) expect(value).toBeGreaterThanOrEqual(400);
    for (const value of samples(1, 100, 3000, 0)) expect(value).toBeLessThanOrEqual(100);
  });
});

describe('backoffMs without a cap', () => {
  it('keeps doubling and stays a finite number of milliseconds', () => {
    const value = backoffMs(10, 1000);
    expect(value).toBeGreaterThanOrEqual(256000);
    expect(value).toBeLessThanOrEqual(512000);
    expect(Number.isFinite(backoffMs(100000, 1000))).toBe(true);
  });
});
