import { addressKey, FailureLimiter, inRanges } from './auth-throttle';

describe('FailureLimiter', () => {
  let now: number;
  const clock = () => now;
  beforeEach(() => {
    now = 1_000_000;
  });

  it('throttles a key at its limit-th failure within the window, for a window', () => {
    const limiter = new FailureLimiter({ limit: 3, windowMs: 60000 }, clock);
    expect(limiter.fail('a')).toBe(false);
    now += 10000;
    expect(limiter.fail('a')).toBe(false);
    expect(limiter.lockedFor('a')).toBe(0);
    expect(limiter.fail('a')).toBe(true);
    expect(limiter.lockedFor('a')).toBe(60000);
    now += 59999;
    expect(limiter.lockedFor('a')).toBe(1);
    now += 1;
    expect(limiter.lockedFor('a')).toBe(0);
    // A fresh window: one failure does not throttle it again.
    expect(limiter.fail('a')).toBe(false);
    expect(limiter.lockedFor('a')).toBe(0);
  });

  it('forgets failures older than the window', () => {
    const limiter = new FailureLimiter({ limit: 3, windowMs: 60000 }, clock);
    limiter.fail('a');
    limiter.fail('a');
    now += 60000;
    expect(limiter.fail('a')).toBe(false);
    expect(limiter.fail('a')).toBe(false);
    expect(limiter.fail('a')).toBe(true);
  });

  it('keeps a key that goes on failing throttled: each failure during it starts the window again', () => {
    const limiter = new FailureLimiter({ limit: 1, windowMs: 60000 }, clock);
    limiter.fail('a');
    now += 30000;
    expect(limiter.fail('a')).toBe(false);
    expect(limiter.lockedFor('a')).toBe(60000);
    now += 60000;
    expect(limiter.lockedFor('a')).toBe(0);
  });

  it('counts each key apart', () => {
    const limiter = new FailureLimiter({ limit: 2, windowMs: 60000 }, clock);
    limiter.fail('address 1');
    limiter.fail('address 2');
    expect(limiter.fail('address 2')).toBe(true);
    expect(limiter.lockedFor('address 1')).toBe(0);
    expect(limiter.lockedFor('address 2')).toBe(60000);
  });

  it('never throttles with limit 0', () => {
    const limiter = new FailureLimiter({ limit: 0, windowMs: 60000 }, clock);
    for (let i = 0; i < 100; i++) limiter.fail('a');
    expect(limiter.lockedFor('a')).toBe(0);
    expect(limiter.size).toBe(0);
  });

  it('keeps at most maxKeys, forgetting the one whose last failure is oldest', () => {
    const limiter = new FailureLimiter({ limit: 2, windowMs: 60000, maxKeys: 3 }, clock);
    limiter.fail('a');
    limiter.fail('b');
    limiter.fail('c');
    limiter.fail('a');
    expect(limiter.lockedFor('a')).toBe(60000);
    for (let i = 0; i < 1000; i++) limiter.fail(`spray ${i}`);
    expect(limiter.size).toBe(3);
    expect(limiter.lockedFor('a')).toBe(0);
  });
});

describe('addressKey', () => {
  it('counts an IPv4 client by its address, an IPv4-mapped one as IPv4, an IPv6 one by its /64', () => {
    expect(addressKey('203.0.113.9')).toBe('address 203.0.113.9');
    expect(addressKey('::ffff:203.0.113.9')).toBe('address 203.0.113.9');
    expect(addressKey('2001:db8:1:2::9')).toBe(addressKey('2001:db8:1:2:ffff::1'));
    expect(addressKey('2001:db8:1:2::9')).not.toBe(addressKey('2001:db8:1:3::9'));
  });
});

describe('inRanges', () => {
  it('matches addresses inside CIDR ranges and single addresses, IPv4-mapped ones as IPv4', () => {
    const exempt = inRanges(['203.0.113.0/24', '2001:db8::/32', '198.51.100.7']);
    expect(['203.0.113.1', '::ffff:203.0.113.200', '2001:db8:ff::1', '198.51.100.7'].map(exempt)).toEqual([true, true, true, true]);
    expect(['203.0.114.1', '2001:db9::1', '198.51.100.8', 'not an address'].map(exempt)).toEqual([false, false, false, false]);
    expect(inRanges([])('203.0.113.1')).toBe(false);
  });
});
