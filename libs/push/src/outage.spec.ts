import { createOutageClock } from './outage';

describe('OutageClock', () => {
  it('remembers when PostgreSQL was last out of reach, and nothing else', () => {
    let now = 1000;
    const clock = createOutageClock(() => now);
    expect(clock.sinceLast()).toBe(Number.POSITIVE_INFINITY);
    clock.saw(new Error('duplicate key value violates unique constraint'));
    expect(clock.sinceLast()).toBe(Number.POSITIVE_INFINITY);
    clock.saw(new Error('server login has been failing, try again later (server_login_retry)'));
    now = 1500;
    expect(clock.sinceLast()).toBe(500);
    clock.saw(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
    expect(clock.sinceLast()).toBe(0);
  });
});
