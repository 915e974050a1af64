import { closeDb, createDb, insertEvent, type Db, type DispatchResult } from '@operator/db';
import { uniqueName, until } from '@operator/testing';
import { createClaimSource, held, type Claimed, type ClaimQueue, type ClaimSource, type ClaimSourceOptions } from './claims';

// The claim source alone, over the test database: events of a topic of each test's own (so other
// suites' events are never claimed), claimed into an array that stands for the scheduler.

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

interface ArrayQueue extends ClaimQueue {
  items: Claimed[];
}

function arrayQueue(): ArrayQueue {
  const queue: ArrayQueue = {
    items: [],
    add: (items) => void queue.items.push(...items),
    remove(matches) {
      const removed = queue.items.filter(matches);
      queue.items = queue.items.filter((item) => !matches(item));
      return removed;
    },
    get waiting() {
      return queue.items.length;
    },
  };
  return queue;
}

describe('claim source (PostgreSQL)', () => {
  let db: Db;
  let topic: string;
  const sources: ClaimSource[] = [];

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 6 });
  });
  afterAll(() => closeDb(db));
  beforeEach(() => {
    topic = uniqueName('claims');
  });
  afterEach(async () => {
    await Promise.all(sources.splice(0).map((claims) => claims.stop()));
  });

  function source(overrides: Partial<ClaimSourceOptions> = {}): ClaimSource & { queue: ArrayQueue } {
    const queue = arrayQueue();
    const made = createClaimSource({ db, log: silent, topics: [topic], queue, leaseMs: 5000, timeoutMs: 300, concurrency: 4, batchSize: 50, idleMs: 20, ...overrides });
    sources.push(made);
    return Object.assign(made, { queue });
  }

  /** Inserts events of the test's topic, one per key given, in order; answers their ids. */
  async function insert(...keys: string[]): Promise<string[]> {
    const ids: string[] = [];
    for (const key of keys) ids.push(await insertEvent(db.pool, { topic, orderingKey: key, status: 'credited', body: `{"key":"${key}"}` }));
    return ids;
  }

  /** Claims until the queue holds `count` items (events committed while an older transaction runs are taken once it ends). */
  const claimUntil = (claims: ClaimSource & { queue: ArrayQueue }, count: number) =>
    until(async () => (await claims.claim(50), claims.queue.waiting >= count), `${count} events to be claimed`);

  const dispatchRows = async (ids: string[]) =>
    (
      await db.pool.query<{ id: string; state: string; attempts: number }>(
        `SELECT d.id, d.state, d.attempts FROM event_dispatch d JOIN events e ON e.id = d.id WHERE d.id = ANY($1::uuid[]) ORDER BY e.seq`,
        [ids],
      )
    ).rows;
  const ranges = async () => (await db.pool.query(`SELECT id FROM dispatch_ranges WHERE topic = $1`, [topic])).rowCount;
  const delivered = (items: Claimed[]) => items.map(({ event, claim }) => ({ result: { event, outcome: 'delivered' } as DispatchResult, claim }));

  it("claims a topic's events as one range in seq order, and completes it once every result is written", async () => {
    const ids = await insert('a', 'b', 'a');
    const claims = source();
    await claimUntil(claims, 3);
    expect(claims.queue.items.map((item) => item.event.id)).toEqual(ids);
    expect(new Set(claims.queue.items.map((item) => item.claim)).size).toBe(1);
    expect(claims.queue.items.every((item) => item.claim.kind === 'range' && item.event.source === 'range' && !item.event.blocked)).toBe(true);
    expect(await ranges()).toBe(1);
    // Nothing more to take: the cursor moved past them.
    expect(await claims.claim(50)).toBe(0);

    claims.record(delivered(claims.queue.remove(() => true)));
    await claims.written();
    expect(await ranges()).toBe(0);
    expect(await dispatchRows(ids)).toEqual(ids.map((id) => ({ id, state: 'delivered', attempts: 1 })));
  });

  it('holds an event behind an earlier one of its key, and claims it as a retry once that one is through', async () => {
    await insert('a');
    const holder = source();
    await claimUntil(holder, 1);
    const [second, other] = await insert('a', 'b');
    const next = source();
    await claimUntil(next, 1);
    // The second of key a waits as a retry; b goes out now.
    expect(next.queue.items.map((item) => item.event.id)).toEqual([other]);
    await next.written();
    expect(await dispatchRows([second])).toEqual([{ id: second, state: 'pending', attempts: 0 }]);
    expect(await next.claim(50)).toBe(0);

    holder.record(delivered(holder.queue.remove(() => true)));
    await holder.written();
    await claimUntil(next, 2);
    expect(next.queue.items[1]).toMatchObject({ event: { id: second, source: 'retry', attempts: 0 }, claim: { kind: 'retry' } });
  });

  it('claims a retry again once it is due, with its tries counted', async () => {
    const [id] = await insert('a');
    const claims = source();
    await claimUntil(claims, 1);
    const [item] = claims.queue.remove(() => true);
    claims.record([{ result: { event: item.event, outcome: 'retry', nextAttemptAt: new Date(Date.now() + 1500), error: 'HTTP 503' }, claim: item.claim }]);
    await claims.written();
    // Not due yet: 1.5 s leaves a loaded machine time to write the retry and look again.
    expect(await claims.claim(50)).toBe(0);
    await claimUntil(claims, 1);
    expect(claims.queue.items[0]).toMatchObject({ event: { id, source: 'retry', attempts: 1 }, claim: { kind: 'retry' } });
  });

  it('gives back what waits: another source takes the range at once, from its start', async () => {
    const ids = await insert('a', 'b');
    const leaving = source({ leaseMs: 60_000 });
    await claimUntil(leaving, 2);
    expect(await leaving.giveBack()).toBe(1);
    expect(leaving.queue.waiting).toBe(0);
    const taking = source({ leaseMs: 60_000 });
    await claimUntil(taking, 2);
    expect(taking.queue.items.map((item) => item.event.id)).toEqual(ids);
  });

  it('keeps its leases while renewing, and drops a range another source took after its lease lapsed', async () => {
    await insert('a', 'b');
    const warnings: string[] = [];
    const kept = source({ leaseMs: 300, log: { ...silent, warn: (_fields: object, message: string) => void warnings.push(message) } });
    kept.renew(true);
    await claimUntil(kept, 2);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const other = source({ leaseMs: 300 });
    expect(await other.claim(50)).toBe(0);

    kept.renew(false);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await other.claim(50)).toBe(2);
    // Renewing again, the first finds the range taken: its events leave its queue.
    kept.renew(true);
    await until(() => kept.queue.waiting === 0, 'the lost range to leave the queue');
    kept.renew(false);
    expect(warnings).toEqual(['lost a range of events to another dispatcher (its lease lapsed); it posts them']);
  });

  it('lets a claim start its first posts whatever its lease, and spills the rest of a range too late for it as retries', async () => {
    const ids = await insert('a', 'b', 'c');
    // Posts may take longer than the lease: only the first `concurrency` may start.
    const claims = source({ leaseMs: 1000, timeoutMs: 5000, concurrency: 1 });
    await claimUntil(claims, 3);
    const [first, ...rest] = claims.queue.items;
    expect(claims.mayStart(first)).toBe(true);
    claims.queue.remove((item) => item === first);
    claims.taken([first]);
    expect(claims.mayStart(rest[0])).toBe(false);

    claims.late(claims.queue.remove((item) => item === rest[0]));
    expect(claims.queue.waiting).toBe(0);
    claims.record(delivered([first]));
    await claims.written();
    expect(await dispatchRows(ids)).toEqual([
      { id: ids[0], state: 'delivered', attempts: 1 },
      { id: ids[1], state: 'pending', attempts: 0 },
      { id: ids[2], state: 'pending', attempts: 0 },
    ]);
    expect(await ranges()).toBe(0);
  });

  it('gives back a retry too late for its lease: it can be claimed again at once', async () => {
    await insert('a');
    const claims = source({ leaseMs: 60_000 });
    await claimUntil(claims, 1);
    claims.record(held(claims.queue.remove(() => true)));
    await claims.written();
    const late = source({ leaseMs: 60_000, timeoutMs: 120_000, concurrency: 1 });
    await claimUntil(late, 1);
    const [retry] = late.queue.items;
    late.taken([retry]);
    expect(late.mayStart(retry)).toBe(false);
    late.late(late.queue.remove(() => true));
    const again = source({ leaseMs: 60_000 });
    await claimUntil(again, 1);
    expect(again.queue.items[0].event.id).toBe(retry.event.id);
  });

  it('claims continuously once started, topping the queue up to the batch size when half of it is taken', async () => {
    await insert(...Array.from({ length: 10 }, (_, i) => `k${i}`));
    const claims = source({ batchSize: 4 });
    claims.start();
    await until(() => claims.queue.waiting === 4, 'a batch to be claimed');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(claims.queue.waiting).toBe(4);

    const takeOne = () => claims.taken(claims.queue.remove((item) => item === claims.queue.items[0]));
    // Three of four still waiting: more than half, so nothing more is claimed yet.
    takeOne();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(claims.queue.waiting).toBe(3);
    takeOne();
    await until(() => claims.queue.waiting === 4, 'the queue to be topped up');
    claims.taken(claims.queue.remove(() => true));
    await until(() => claims.queue.waiting === 4, 'the last events');
    await claims.stop();
    expect(claims.queue.waiting).toBe(4);
  });
});
