import { cachedAccessToken, type GrantedToken } from './access-token';

/** Grants answered by hand: each call waits until the test settles it. */
function grants() {
  const calls: { resolve: (token: GrantedToken) => void; reject: (error: Error) => void }[] = [];
  const grant = () => new Promise<GrantedToken>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, grant };
}

const MINUTE = 60_000;

describe('cachedAccessToken', () => {
  it('shares one grant among every caller waiting for it, and keeps the token', async () => {
    const { calls, grant } = grants();
    const token = cachedAccessToken(grant, { renewBeforeMs: 5 * MINUTE });
    const waiting = Promise.all([token.get(), token.get(), token.get()]);
    expect(calls).toHaveLength(1);
    calls[0].resolve({ value: 'a', lifetimeMs: 60 * MINUTE });
    expect(await waiting).toEqual(['a', 'a', 'a']);
    expect(await token.get()).toBe('a');
    expect(calls).toHaveLength(1);
  });

  it('renews the token renewBeforeMs before it expires', async () => {
    let clock = 0;
    const { calls, grant } = grants();
    const token = cachedAccessToken(grant, { renewBeforeMs: 5 * MINUTE, now: () => clock });
    const first = token.get();
    calls[0].resolve({ value: 'a', lifetimeMs: 60 * MINUTE });
    await first;
    clock = 55 * MINUTE - 1;
    expect(await token.get()).toBe('a');
    clock = 55 * MINUTE;
    const renewed = token.get();
    expect(calls).toHaveLength(2);
    calls[1].resolve({ value: 'b', lifetimeMs: 60 * MINUTE });
    expect(await renewed).toBe('b');
  });

  it('renews halfway through a lifetime shorter than twice renewBeforeMs', async () => {
    let clock = 0;
    const { calls, grant } = grants();
    const token = cachedAccessToken(grant, { renewBeforeMs: 5 * MINUTE, now: () => clock });
    const first = token.get();
    calls[0].resolve({ value: 'a', lifetimeMs: 2 * MINUTE });
    await first;
    clock = MINUTE - 1;
    expect(await token.get()).toBe('a');
    clock = MINUTE;
    void token.get();
    expect(calls).toHaveLength(2);
  });

  it('fails every waiting caller with a failed grant, and asks again on the next call', async () => {
    const { calls, grant } = grants();
    const token = cachedAccessToken(grant, { renewBeforeMs: 5 * MINUTE });
    const waiting = [token.get(), token.get()];
    calls[0].reject(new Error('refused'));
    for (const one of waiting) await expect(one).rejects.toThrow('refused');
    const again = token.get();
    expect(calls).toHaveLength(2);
    calls[1].resolve({ value: 'b', lifetimeMs: 60 * MINUTE });
    expect(await again).toBe('b');
  });

  it('forgets a refused token, but not a newer one that came meanwhile', async () => {
    const { calls, grant } = grants();
    const token = cachedAccessToken(grant, { renewBeforeMs: 5 * MINUTE });
    const first = token.get();
    calls[0].resolve({ value: 'a', lifetimeMs: 60 * MINUTE });
    await first;
    token.refused('a');
    const second = token.get();
    expect(calls).toHaveLength(2);
    calls[1].resolve({ value: 'b', lifetimeMs: 60 * MINUTE });
    expect(await second).toBe('b');
    token.refused('a');
    expect(await token.get()).toBe('b');
    expect(calls).toHaveLength(2);
  });
});
