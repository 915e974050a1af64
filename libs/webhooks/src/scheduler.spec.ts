import { createKeyedScheduler, type KeyedSchedulerOptions } from './scheduler';

// The scheduler alone, in memory: items are { key, n }, and each run is held until the test lets
// it end, so what runs at once, and in which order, can be read at every step.

interface Item {
  key: string;
  n: number;
}

const item = (key: string, n: number): Item => ({ key, n });
const names = (group: Item[]) => group.map(({ key, n }) => `${key}${n}`);
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A scheduler whose runs wait until released; `runs` lists every group started, `live` those still running. */
function harness(overrides: Partial<KeyedSchedulerOptions<Item>> = {}) {
  const runs: string[][] = [];
  const live = new Map<string, () => void>();
  let most = 0;
  const scheduler = createKeyedScheduler<Item>({
    concurrency: 2,
    keyOf: (it) => it.key,
    run: (group) =>
      new Promise<void>((resolve) => {
        const name = names(group).join('+');
        runs.push(names(group));
        live.set(name, resolve);
        most = Math.max(most, live.size);
      }),
    ...overrides,
  });
  /** Ends the run of this group and lets the scheduler start what follows. */
  async function end(name: string) {
    const resolve = live.get(name);
    if (!resolve) throw new Error(`${name} is not running (running: ${[...live.keys()].join(', ')})`);
    live.delete(name);
    resolve();
    await tick();
  }
  /** Ends whatever runs until nothing does. */
  async function endAll() {
    while (live.size) await end([...live.keys()][0]);
  }
  return { scheduler, runs, live, end, endAll, most: () => most };
}

describe('keyed scheduler', () => {
  it("runs one key's items one at a time, in the order they came, and other keys' beside them", async () => {
    const h = harness({ concurrency: 4 });
    h.scheduler.add([item('a', 1), item('a', 2), item('b', 1), item('a', 3), item('b', 2)]);
    await tick();
    expect([...h.live.keys()]).toEqual(['a1', 'b1']);

    await h.end('a1');
    expect([...h.live.keys()]).toEqual(['b1', 'a2']);
    await h.end('b1');
    await h.end('a2');
    expect([...h.live.keys()]).toEqual(['b2', 'a3']);
    await h.endAll();
    expect(h.runs.flat()).toEqual(['a1', 'b1', 'a2', 'b2', 'a3']);
    expect(h.scheduler.waiting).toBe(0);
  });

  it('runs at most `concurrency` groups at once, and that many when there is work', async () => {
    const h = harness({ concurrency: 3 });
    h.scheduler.add(Array.from({ length: 10 }, (_, i) => item(`k${i}`, 1)));
    await tick();
    expect(h.live.size).toBe(3);
    expect(h.scheduler.waiting).toBe(7);
    const idle = h.scheduler.idle();
    await h.endAll();
    await idle;
    expect(h.runs).toHaveLength(10);
    expect(h.most()).toBe(3);
  });

  it('takes items of different keys together, up to the maximum, and never two of one key', async () => {
    const h = harness({ concurrency: 1, groupMax: () => 3, joins: (first, next) => next.key[0] === first.key[0] });
    h.scheduler.add([item('s1', 1), item('s1', 2), item('x', 1), item('s2', 1), item('s3', 1), item('s4', 1)]);
    await tick();
    // s1's second waits behind its first; x does not fit, and passes its turn.
    expect(h.runs).toEqual([['s11', 's21', 's31']]);
    await h.end('s11+s21+s31');
    expect(h.runs[1]).toEqual(['s12', 's41']);
    await h.endAll();
    expect(h.runs.slice(2)).toEqual([['x1']]);
  });

  it('hands over the items it may not start, and starts what waited behind them', async () => {
    const refused: string[][] = [];
    const h = harness({ admit: (it) => it.n !== 1 || it.key !== 'late', refused: (items) => refused.push(names(items)) });
    h.scheduler.add([item('late', 1), item('late', 2), item('b', 1)]);
    await tick();
    expect(refused).toEqual([['late1']]);
    expect([...h.live.keys()].sort()).toEqual(['b1', 'late2']);
    await h.endAll();
    expect(h.runs.flat().sort()).toEqual(['b1', 'late2']);
  });

  it('carries on after a run that throws: the error is reported and its key is free again', async () => {
    const failures: unknown[] = [];
    const done: string[] = [];
    const scheduler = createKeyedScheduler<Item>({
      concurrency: 2,
      keyOf: (it) => it.key,
      run: async ([it]) => {
        if (it.n === 1) throw new Error(`${it.key} failed`);
        done.push(`${it.key}${it.n}`);
      },
      failed: (error) => failures.push(error),
    });
    scheduler.add([item('a', 1), item('a', 2), item('b', 1), item('b', 2), item('c', 2)]);
    await scheduler.idle();
    expect(failures.map((error) => (error as Error).message).sort()).toEqual(['a failed', 'b failed']);
    expect(done.sort()).toEqual(['a2', 'b2', 'c2']);
  });

  it('gives back the waiting items asked for, in order, and never starts them', async () => {
    const h = harness({ concurrency: 1 });
    h.scheduler.add([item('a', 1), item('a', 2), item('b', 1), item('a', 3)]);
    await tick();
    expect(names(h.scheduler.remove((it) => it.key === 'a'))).toEqual(['a2', 'a3']);
    expect(h.scheduler.waiting).toBe(1);
    await h.endAll();
    expect(h.runs.flat()).toEqual(['a1', 'b1']);
  });

  it('reports each take, with the group taken', async () => {
    const taken: string[][] = [];
    const h = harness({ concurrency: 1, taken: (group) => taken.push(names(group)) });
    h.scheduler.add([item('a', 1), item('a', 2)]);
    await tick();
    await h.endAll();
    expect(taken.filter((group) => group.length)).toEqual([['a1'], ['a2']]);
  });

  it('is idle at once with nothing to do, and only once the last run ended otherwise', async () => {
    const h = harness({ concurrency: 1 });
    await h.scheduler.idle();
    h.scheduler.add([item('a', 1)]);
    let idle = false;
    const settled = h.scheduler.idle().then(() => (idle = true));
    await tick();
    expect(idle).toBe(false);
    // Added while the only place is taken: it starts once that run ends.
    h.scheduler.add([item('b', 1)]);
    await h.end('a1');
    expect(idle).toBe(false);
    await h.end('b1');
    await settled;
    expect(h.runs.flat()).toEqual(['a1', 'b1']);
  });

  it('is idle only once what followed runs that ended together has run too', async () => {
    const seen: string[] = [];
    const scheduler = createKeyedScheduler<Item>({ concurrency: 2, keyOf: (it) => it.key, run: async ([it]) => void seen.push(`${it.key}${it.n}`) });
    scheduler.add([item('a', 1), item('b', 1), item('b', 2), item('b', 3)]);
    await scheduler.idle();
    expect(seen.sort()).toEqual(['a1', 'b1', 'b2', 'b3']);
  });

  it('starts what is added just as the last run ends, with one place', async () => {
    const seen: string[] = [];
    const scheduler = createKeyedScheduler<Item>({
      concurrency: 1,
      keyOf: (it) => it.key,
      run: async ([it]) => {
        seen.push(`${it.key}${it.n}`);
        // The next item comes while this run is ending, in each of its microtasks.
        if (it.n < 20) void Promise.resolve().then(() => scheduler.add([item(it.n % 2 ? 'a' : 'b', it.n + 1)]));
      },
    });
    scheduler.add([item('a', 1)]);
    for (let i = 0; i < 50 && seen.length < 20; i++) await tick();
    await scheduler.idle();
    expect(seen).toHaveLength(20);
  });

  it('takes thousands waiting from the front, in order, counting and removing only those still waiting', async () => {
    const h = harness({ concurrency: 3 });
    // Distinct keys, the first three with a second item just behind the first: most takes take the
    // head, and the first ones an item behind it.
    const items = Array.from({ length: 3000 }, (_, n) => (n < 3 ? [item(`k${n}`, 1), item(`k${n}`, 2)] : [item(`k${n}`, 1)])).flat();
    h.scheduler.add(items);
    await tick();
    expect(h.scheduler.waiting).toBe(3000);
    for (let ended = 0; ended < 2000; ended++) await h.end([...h.live.keys()][0]);
    expect(h.scheduler.waiting).toBe(1000);
    expect(h.runs.slice(0, 7).flat()).toEqual(['k01', 'k11', 'k21', 'k02', 'k12', 'k22', 'k31']);

    // Removed: only items that still wait, never one already taken.
    const removed = h.scheduler.remove((it) => Number(it.key.slice(1)) % 2 === 0);
    expect(removed.map((it) => it.key)).toEqual(Array.from({ length: 500 }, (_, i) => `k${2000 + 2 * i}`));
    expect(h.scheduler.waiting).toBe(500);
    await h.endAll();
    expect(h.scheduler.waiting).toBe(0);
    expect(h.runs.flat()).toEqual([...new Set(h.runs.flat())]);
    expect(h.runs).toHaveLength(3003 - 500);
    expect(h.runs.at(-1)).toEqual(['k29991']);
  });
});
