import { settledWithin } from '@operator/testing';
import { createWriteBehind, type WriteBehindOptions } from './write-behind';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A write the test ends by hand: each call is kept with its items and how to end it. */
function heldWrites() {
  const calls: { items: string[]; end(error?: Error): void }[] = [];
  const write = (items: string[]) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ items, end: (error) => (error ? reject(error) : resolve()) });
    });
  return { calls, write };
}

const writer = (options: Partial<WriteBehindOptions<string>> & Pick<WriteBehindOptions<string>, 'write'>) =>
  createWriteBehind<string>({ log: silent, what: 'things', retryMs: 10, retryMaxMs: 20, ...options });

const unreachable = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('write-behind', () => {
  it('writes what came from several adds within the interval in one write', async () => {
    const written: string[][] = [];
    const w = writer({ flushMs: 50, write: async (items) => void written.push(items) });
    const first = w.add(['a']);
    const second = w.add(['b', 'c']);
    await Promise.all([first, second]);
    expect(written).toEqual([['a', 'b', 'c']]);
  });

  it('writes what comes while a slow write runs at its own time, beside it, when more than one write may run', async () => {
    const { calls, write } = heldWrites();
    const w = writer({ flushMs: 5, maxWriting: 2, write });
    const slow = w.add(['a']);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls.map((call) => call.items)).toEqual([['a']]);

    const next = w.add(['b']);
    await new Promise((resolve) => setTimeout(resolve, 30));
    // The first write still runs: the second went out without waiting for it.
    expect(calls.map((call) => call.items)).toEqual([['a'], ['b']]);
    calls[1].end();
    await next;
    expect(await settledWithin(slow)).toBe(false);
    calls[0].end();
    await slow;
  });

  it('with one write at a time, writes in the order items came, what waited in one write after the running one', async () => {
    const { calls, write } = heldWrites();
    const w = writer({ flushMs: 5, write });
    const first = w.add(['a']);
    await new Promise((resolve) => setTimeout(resolve, 30));
    const later = [w.add(['b']), w.add(['c'])];
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls.map((call) => call.items)).toEqual([['a']]);
    calls[0].end();
    await first;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls.map((call) => call.items)).toEqual([['a'], ['b', 'c']]);
    calls[1].end();
    await Promise.all(later);
  });

  it('writes what waits at once when told, and when no write is free, as soon as one is', async () => {
    const { calls, write } = heldWrites();
    const w = writer({ flushMs: 60_000, write });
    const first = w.add(['a']);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls).toHaveLength(0);
    w.flushNow();
    expect(calls.map((call) => call.items)).toEqual([['a']]);
    // The one write is busy: 'b' goes when it ends, not a minute later.
    const second = w.add(['b']);
    w.flushNow();
    expect(calls).toHaveLength(1);
    calls[0].end();
    await first;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls.map((call) => call.items)).toEqual([['a'], ['b']]);
    calls[1].end();
    await second;
  });

  it('holds items through an outage, one write at a time, and writes them with what came meanwhile once it ends', async () => {
    const { calls, write } = heldWrites();
    const w = writer({ flushMs: 5, maxWriting: 3, write });
    const first = w.add(['a']);
    await new Promise((resolve) => setTimeout(resolve, 20));
    calls[0].end(unreachable());
    const second = w.add(['b']);
    await new Promise((resolve) => setTimeout(resolve, 40));
    // Retried once, with what came meanwhile; nothing beside it.
    expect(calls.map((call) => call.items)).toEqual([['a'], ['a', 'b']]);
    calls[1].end(unreachable());
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(calls).toHaveLength(3);
    expect(await settledWithin(first)).toBe(false);
    calls[2].end();
    await Promise.all([first, second]);
    expect(w.pending).toBe(0);
    await w.drain();
  });

  it('gives up items whose write keeps failing for a reason other than an outage', async () => {
    const w = writer({ flushMs: 1, maxFailures: 2, write: async () => Promise.reject(new Error('syntax error')) });
    await expect(w.add(['a'])).rejects.toThrow('syntax error');
    await w.drain();
  });

  it('drain waits for items not written yet', async () => {
    const { calls, write } = heldWrites();
    const w = writer({ flushMs: 5, write });
    void w.add(['a']);
    const drained = w.drain();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await settledWithin(drained)).toBe(false);
    calls[0].end();
    await drained;
  });
});
