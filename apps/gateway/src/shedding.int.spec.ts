import { until } from '@operator/testing';
import { Harness } from './test/harness';

// Load shedding: 503 with Retry-After (never 429: the CRM drops 4xx answers) while the event loop
// lags or the live heap is past its limit, from the first sample after the pressure to the first
// sample after it ends; /health/live is always answered.

const blockEventLoop = (ms: number) => {
  const busyUntil = Date.now() + ms;
  while (Date.now() < busyUntil) {
    // keep the event loop blocked, as a burst of CPU work would
  }
};

const shed = (h: Harness) => until(async () => (await h.single({})).statusCode === 503, 'shedding', 10_000);
const served = (h: Harness) => until(async () => (await h.single({})).statusCode === 400, 'no more shedding', 10_000);

describe('load shedding on event-loop delay', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open({ MAX_EVENT_LOOP_DELAY_MS: '20' });
  });
  afterAll(() => h.close());

  it('answers 503 with Retry-After while the event loop lags, /health/live 200, and ends with the next sample', async () => {
    expect((await h.single({})).statusCode).toBe(400);
    // Long enough that the one-second mean stays above the limit wherever the block falls.
    blockEventLoop(3000);
    // The delay is sampled once a second; let that sample run.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const response = await h.single({});
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({ error: 'server is overloaded, retry later', code: 503 });
    expect((await h.app.inject({ method: 'GET', url: '/health/live' })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/health/ready' })).statusCode).toBe(503);
    // The pressure is gone: a second later the gateway serves again.
    await served(h);
  });
});

describe('load shedding on memory', () => {
  let h: Harness;
  afterEach(() => h.close());

  it('answers 503 with Retry-After, before the body is read, while the live heap is over MAX_HEAP_USED_BYTES; /health/live 200', async () => {
    // Far below what any Node process holds, so it trips at the first sample.
    h = await Harness.open({ MAX_HEAP_USED_BYTES: String(1024 * 1024) });
    await shed(h);
    const response = await h.single({});
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({ error: 'server is overloaded, retry later', code: 503 });
    // Before anything is read: the body of a shed request is not parsed.
    expect((await h.post('/channels/push/single', '{"not json')).statusCode).toBe(503);
    expect((await h.app.inject({ method: 'GET', url: '/health/live' })).statusCode).toBe(200);
  });

  it('ends as soon as the memory is released, though the resident memory stays where it rose', async () => {
    global.gc?.();
    const limit = process.memoryUsage().heapUsed + 96 * 1024 * 1024;
    h = await Harness.open({ MAX_HEAP_USED_BYTES: String(limit) });
    expect((await h.single({})).statusCode).toBe(400);
    // 160 MiB of live arrays, as a burst of large bodies being parsed would hold.
    let held: number[][] | undefined = Array.from({ length: 160 }, () => new Array<number>(128 * 1024).fill(1.5));
    await shed(h);
    expect((await h.app.inject({ method: 'GET', url: '/health/live' })).statusCode).toBe(200);
    expect(held.length).toBe(160);
    held = undefined;
    await served(h);
  });
});
