import { createStreamPool, inFlightLimit, MAX_STREAMS_PER_CONNECTION, STREAMS_BEFORE_SETTINGS, streamsAllowed, type StreamLease } from './stream-pool';

interface Line {
  id: number;
  limit: number | undefined;
  open: boolean;
}

function pool(maxConnections: number, limit: number | undefined) {
  const opened: Line[] = [];
  const retired: Line[] = [];
  const made = createStreamPool<Line>({
    maxConnections,
    open: () => {
      const line = { id: opened.length + 1, limit, open: true };
      opened.push(line);
      return line;
    },
    streams: (line) => streamsAllowed(line.limit),
    settled: (line) => line.limit !== undefined,
    takesStreams: (line) => line.open,
    retired: (line) => retired.push(line),
  });
  return { pool: made, opened, retired };
}

const leases = async <C>(count: number, lease: () => Promise<StreamLease<C>>) => Promise.all(Array.from({ length: count }, lease));
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('streamsAllowed', () => {
  it('takes what the server announced, 100 before it did, and no more than the cap', () => {
    expect(streamsAllowed(undefined)).toBe(STREAMS_BEFORE_SETTINGS);
    expect(streamsAllowed(40)).toBe(40);
    expect(streamsAllowed(0)).toBe(0);
    expect(streamsAllowed(2 ** 32 - 1)).toBe(MAX_STREAMS_PER_CONNECTION);
  });
});

describe('createStreamPool', () => {
  it('fills a connection to its streams before it opens another, up to the cap, and holds the rest', async () => {
    const { pool: lines, opened } = pool(2, 3);
    const granted = await leases(6, () => lines.lease());
    expect(opened.map((line) => line.id)).toEqual([1, 2]);
    expect(granted.map((lease) => lease.connection.id).sort()).toEqual([1, 1, 1, 2, 2, 2]);
    let seventh: StreamLease<Line> | undefined;
    void lines.lease().then((lease) => (seventh = lease));
    await tick();
    expect(seventh).toBeUndefined();
    expect(lines.waiting).toBe(1);
    granted[4].release();
    await tick();
    expect(seventh?.connection.id).toBe(granted[4].connection.id);
    expect(lines.inFlight).toBe(6);
    expect(opened).toHaveLength(2);
  });

  it('picks the least busy connection with a stream free', async () => {
    const { pool: lines } = pool(2, 4);
    const granted = await leases(5, () => lines.lease());
    // 4 on the first, then the second opened for the fifth.
    granted[0].release();
    granted[1].release();
    granted[2].release();
    expect((await lines.lease()).connection.id).toBe(1);
  });

  it('waits for an unsettled connection’s SETTINGS rather than open another', async () => {
    const { pool: lines, opened } = pool(4, undefined);
    await leases(STREAMS_BEFORE_SETTINGS, () => lines.lease());
    let next: StreamLease<Line> | undefined;
    void lines.lease().then((lease) => (next = lease));
    await tick();
    expect(next).toBeUndefined();
    expect(opened).toHaveLength(1);
    // The server allows 1000 on it: the waiting send takes one of them.
    opened[0].limit = 1000;
    lines.wake();
    await tick();
    expect(next?.connection.id).toBe(1);
    expect(opened).toHaveLength(1);
  });

  it('retires a connection that takes no more streams once its last one is done, which makes room for a new one', async () => {
    const { pool: lines, opened, retired } = pool(1, 2);
    const [a, b] = await leases(2, () => lines.lease());
    opened[0].open = false;
    let next: StreamLease<Line> | undefined;
    void lines.lease().then((lease) => (next = lease));
    lines.wake();
    a.release();
    await tick();
    expect(next).toBeUndefined();
    expect(retired).toEqual([]);
    b.release();
    await tick();
    expect(retired.map((line) => line.id)).toEqual([1]);
    expect(next?.connection.id).toBe(2);
    expect(lines.connections).toBe(1);
  });

  it('counts a release once, however often it is called', async () => {
    const { pool: lines } = pool(1, 2);
    const lease = await lines.lease();
    lease.release();
    lease.release();
    expect(lines.inFlight).toBe(0);
    await leases(2, () => lines.lease());
    expect(lines.inFlight).toBe(2);
  });
});

describe('inFlightLimit', () => {
  it('runs at most the limit at once, and every task when there is none', async () => {
    let running = 0;
    let peak = 0;
    const task = async () => {
      running += 1;
      peak = Math.max(peak, running);
      await tick();
      running -= 1;
    };
    const limited = inFlightLimit(3);
    await Promise.all(Array.from({ length: 10 }, () => limited(task)));
    expect(peak).toBe(3);
    peak = 0;
    const open = inFlightLimit(undefined);
    await Promise.all(Array.from({ length: 10 }, () => open(task)));
    expect(peak).toBe(10);
  });
});
