import { until } from '@operator/testing';
import { Harness } from './test/harness';

describe('load shedding', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open({ MAX_EVENT_LOOP_DELAY_MS: '20' });
  });
  afterAll(() => h.close());

  it('answers 503 with Retry-After, never 429, while the event loop lags', async () => {
    expect((await h.single({})).statusCode).toBe(400);
    // Long enough that the one-second mean stays above the limit wherever the block falls.
    const busyUntil = Date.now() + 3000;
    while (Date.now() < busyUntil) {
      // keep the event loop blocked, as a burst of CPU work would
    }
    // under-pressure samples the delay once a second; let that sample run.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const response = await h.single({});
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({ error: 'server is overloaded, retry later', code: response.statusCode });
  });
});

describe('load shedding on memory', () => {
  let h: Harness;
  beforeAll(async () => {
    // Far below what any Node process holds, so it trips at the first sample.
    h = await Harness.open({ MAX_RSS_BYTES: String(1024 * 1024) });
  });
  afterAll(() => h.close());

  it('answers 503 with Retry-After, never 429, while resident memory is over MAX_RSS_BYTES', async () => {
    // under-pressure reads the memory once a second; until then it has no sample.
    const response = await until(async () => {
      const answer = await h.single({});
      return answer.statusCode === 503 && answer;
    }, 'the first memory sample', 5000);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({ error: 'server is overloaded, retry later', code: response.statusCode });
    // Before anything is read: the body of a shed request is not parsed.
    expect((await h.post('/channels/push/single', '{"not json')).statusCode).toBe(503);
  });
});
