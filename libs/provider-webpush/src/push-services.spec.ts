import { CREDENTIALS_REFUSED_AFTER, CREDENTIALS_REFUSED_WINDOW_MS, PushServiceMemory } from './push-services';

describe('what a provider client remembers of push services', () => {
  const A = 'https://a.push.example.test';
  const B = 'https://b.push.example.test';

  it('pauses one origin until the time asked, and no other', () => {
    const memory = new PushServiceMemory();
    memory.pause(A, 60_000, 'HTTP 503', 1000);
    expect(memory.paused(A, 1000)).toEqual({ remainingMs: 60_000, reason: 'HTTP 503' });
    expect(memory.paused(A, 31_000)).toEqual({ remainingMs: 30_000, reason: 'HTTP 503' });
    expect(memory.paused(B, 31_000)).toBeNull();
    expect(memory.paused(A, 61_000)).toBeNull();
  });

  it('keeps the longer of two pauses, and ignores one of no length', () => {
    const memory = new PushServiceMemory();
    memory.pause(A, 60_000, 'HTTP 503', 0);
    memory.pause(A, 5_000, 'HTTP 500', 0);
    memory.pause(B, 0, 'HTTP 503', 0);
    expect(memory.paused(A, 0)).toEqual({ remainingMs: 60_000, reason: 'HTTP 503' });
    expect(memory.paused(B, 0)).toBeNull();
  });

  it('counts distinct subscriptions refusing us, per origin, until the origin takes a message', () => {
    const memory = new PushServiceMemory();
    expect(memory.refused(A, `${A}/1`, 0)).toBe(1);
    expect(memory.refused(A, `${A}/1`, 1)).toBe(1);
    expect(memory.refused(B, `${B}/2`, 2)).toBe(1);
    expect(memory.refused(A, `${A}/2`, 3)).toBe(2);
    memory.succeeded(A);
    expect(memory.refused(A, `${A}/3`, 4)).toBe(1);
    expect(memory.refused(A, `${A}/4`, 5)).toBe(2);
    expect(memory.refused(A, `${A}/5`, 6)).toBe(CREDENTIALS_REFUSED_AFTER);
    // No more than the threshold is kept, however many refuse.
    expect(memory.refused(A, `${A}/6`, 7)).toBe(CREDENTIALS_REFUSED_AFTER);
  });

  it('forgets refusals older than the window', () => {
    const memory = new PushServiceMemory();
    memory.refused(A, `${A}/1`, 0);
    memory.refused(A, `${A}/2`, 1000);
    expect(memory.refused(A, `${A}/3`, CREDENTIALS_REFUSED_WINDOW_MS + 500)).toBe(2);
    // A subscription refusing again counts from its latest refusal.
    expect(memory.refused(A, `${A}/2`, 2 * CREDENTIALS_REFUSED_WINDOW_MS)).toBe(2);
    expect(memory.refused(A, `${A}/4`, 2 * CREDENTIALS_REFUSED_WINDOW_MS + 1000)).toBe(2);
  });
});
