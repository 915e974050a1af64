import { FailureLimiter } from './auth-throttle';

describe('FailureLimiter', () => {
  let now: number;
  const clock = () => now;
  beforeEach(() => {
    now = 1_000_000;
  });

  it('locks a key out at its limit-th failure within the window, for a window', () => {
    const limiter = new FailureLimiter({ limit: 3, windowMs: 60000 }, clock);
    expect(limiter.fail(['a'])).toEqual([]);
    now += 10000;
    expect(limiter.fail(['a'])).toEqual([]);
    expect(limiter.lockedFor(['a'])).toBe(0);
    expect(limiter.fail(['a'])).toEqual(['a']);
    expect(limiter.lockedFor(['a'])).toBe(60000);
    now += 59999;
    expect(limiter.lockedFor(['a'])).toBe(1);
    now += 1;
    expect(limiter.lockedFor(['a'])).toBe(0);
    // A fresh window: one failure does not lock it again.
    expect(limiter.fail(['a'])).toEqual([]);
    expect(limiter.lockedFor(['a'])).toBe(0);
  });

  it('forgets failures older than the window', () => {
    const limiter = new FailureLimiter({ limit: 3, windowMs: 60000 }, clock);
    limiter.fail(['a']);
    limiter.fail(['a']);
    now += 60000;
    expect(limiter.fail(['a'])).toEqual([]);
    expect(limiter.fail(['a'])).toEqual([]);
    expect(limiter.fail(['a'])).toEqual(['a']);
  });

  it('does not lengthen a lockout with the failures made during it', () => {
    const limiter = new FailureLimiter({ limit: 1, windowMs: 60000 }, clock);
    limiter.fail(['a']);
    now += 30000;
    expect(limiter.fail(['a'])).toEqual([]);
    expect(limiter.lockedFor(['a'])).toBe(30000);
  });

  it('counts each key apart, and answers the longest wait of the keys asked about', () => {
    const limiter = new FailureLimiter({ limit: 2, windowMs: 60000 }, clock);
    limiter.fail(['address 1', 'user crm']);
    now += 5000;
    expect(limiter.fail(['address 2', 'user crm'])).toEqual(['user crm']);
    expect(limiter.lockedFor(['address 1'])).toBe(0);
    expect(limiter.lockedFor(['address 3', 'user crm'])).toBe(60000);
    expect(limiter.fail(['address 1'])).toEqual(['address 1']);
    expect(limiter.lockedFor(['address 1', 'user crm'])).toBe(60000);
  });

  it('never locks with limit 0', () => {
    const limiter = new FailureLimiter({ limit: 0, windowMs: 60000 }, clock);
    for (let i = 0; i < 100; i++) limiter.fail(['a']);
    expect(limiter.lockedFor(['a'])).toBe(0);
    expect(limiter.size).toBe(0);
  });

  it('keeps at most maxKeys, forgetting the one whose last failure is oldest', () => {
    const limiter = new FailureLimiter({ limit: 2, windowMs: 60000, maxKeys: 3 }, clock);
    limiter.fail(['a']);
    limiter.fail(['b']);
    limiter.fail(['c']);
    limiter.fail(['a']);
    expect(limiter.lockedFor(['a'])).toBe(60000);
    for (let i = 0; i < 1000; i++) limiter.fail([`spray ${i}`]);
    expect(limiter.size).toBe(3);
    expect(limiter.lockedFor(['a'])).toBe(0);
  });
});
