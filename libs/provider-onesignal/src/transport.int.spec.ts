import { FakeOneSignal, oneSignalAnswers, startConnectProxy, until } from '@operator/testing';
import { createOneSignalProvider, MAX_ANSWER_BYTES } from './index';
import { failure, notification, oneSignalSuite, target } from './test/fixture';

// What OneSignal's errors, a slow or broken server, and the operator's network settings make of a
// send: real sockets to the local OneSignal API, and a real CONNECT proxy.

const MiB = 1024 * 1024;

describe('OneSignal provider: errors and transport', () => {
  const suite = oneSignalSuite();
  const provider = suite.provider;
  let fake: FakeOneSignal;
  beforeAll(() => {
    fake = suite.fake();
  });

  it('takes a 401 as auth for every target', async () => {
    fake.script(oneSignalAnswers.unauthorized());
    const results = await provider().send(notification(), [target(), target()]);
    for (const result of results) expect(failure(result)).toMatchObject({ class: 'auth', code: 'auth', message: expect.stringContaining('HTTP 401: Access denied') });
  });

  it('takes a 429 as the app over its rate limit: rate-limited, with Retry-After, for the whole credential', async () => {
    fake.script(oneSignalAnswers.rateLimited(12));
    const results = await provider().send(notification(), [target(), target()]);
    for (const result of results) {
      expect(failure(result)).toEqual({ class: 'transient', code: 'rate-limited', message: 'HTTP 429: API rate limit exceeded.', retryAfterMs: 12_000, scope: 'credential' });
    }
    expect(fake.delivered).toEqual([]);
  });

  it('takes a 500 as transient for its deliveries only, and a 503 with Retry-After as the credential waiting', async () => {
    fake.script(oneSignalAnswers.serverError(500), oneSignalAnswers.unavailable(30));
    const client = provider();

    const [internal] = await client.send(notification(), [target()]);
    const [down] = await client.send(notification(), [target()]);

    expect(failure(internal)).toEqual({ class: 'transient', code: 'unavailable', message: 'HTTP 500: Internal Server Error' });
    expect(failure(down)).toMatchObject({ class: 'transient', code: 'unavailable', retryAfterMs: 30_000, scope: 'credential' });
  });

  it('gives up on a server that never answers within timeoutMs, as network', async () => {
    fake.script(oneSignalAnswers.silent());
    const started = Date.now();
    const results = await provider({ timeoutMs: 300 }).send(notification(), [target(), target()]);
    const took = Date.now() - started;

    for (const result of results) expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('300 ms') });
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(2000);
    await until(() => fake.inFlight === 0, 'the fake to see the request given up');
  });

  it('counts a slow answer against the deadline too', async () => {
    fake.script({ ...oneSignalAnswers.serverError(500), delayMs: 1000 });
    const [result] = await provider({ timeoutMs: 200 }).send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ code: 'network' });
  });

  it('cuts a huge answer: the rest is never read, and what could not be read is not taken as sent', async () => {
    fake.script(oneSignalAnswers.huge(64 * MiB, 200), oneSignalAnswers.huge(64 * MiB, 500));
    const client = provider();

    const [ok] = await client.send(notification(), [target()]);
    const [error] = await client.send(notification(), [target()]);

    expect(failure(ok)).toMatchObject({ class: 'transient', code: 'unavailable', message: expect.stringContaining('cut') });
    expect(failure(error)).toMatchObject({ class: 'transient', code: 'unavailable', message: 'HTTP 500' });
    await until(() => fake.inFlight === 0, 'the fake to stop writing');
    for (const request of fake.requests) {
      expect(request.answeredBytes).toBeGreaterThanOrEqual(MAX_ANSWER_BYTES);
      expect(request.answeredBytes).toBeLessThan(16 * MiB);
    }
  });

  it('keeps at most `concurrency` requests in flight, over kept-alive connections, and lets them go on close', async () => {
    const slow = await FakeOneSignal.start({ answerDelayMs: 150 });
    try {
      const client = createOneSignalProvider({ appId: slow.appId, restApiKey: slow.restApiKey, endpoint: slow.origin, ca: slow.ca, concurrency: 2, maxConnections: 4 });
      const results = await Promise.all(Array.from({ length: 6 }, () => client.send(notification(), [target()])));
      expect(results.flat().every((result) => result.ok)).toBe(true);
      expect(slow.peakInFlight).toBe(2);
      expect(slow.peakBusyConnections).toBe(2);
      expect(slow.connections).toBeLessThanOrEqual(4);

      // A kept-alive connection takes the next request.
      const opened = slow.connections;
      const again = await client.send(notification(), [target()]);
      expect(again[0].ok).toBe(true);
      expect(slow.connections).toBe(opened);

      await client.close();
      await until(() => slow.openConnections === 0, 'the connections to close');
      await expect(client.send(notification(), [target()])).rejects.toThrow('closed');
    } finally {
      await slow.close();
    }
  });

  it('opens no more connections than maxConnections, whatever the concurrency', async () => {
    const slow = await FakeOneSignal.start({ answerDelayMs: 100 });
    try {
      const client = createOneSignalProvider({ appId: slow.appId, restApiKey: slow.restApiKey, endpoint: slow.origin, ca: slow.ca, concurrency: 10, maxConnections: 3 });
      await Promise.all(Array.from({ length: 9 }, () => client.send(notification(), [target()])));
      expect(slow.peakInFlight).toBe(3);
      expect(slow.connections).toBeLessThanOrEqual(3);
      await client.close();
    } finally {
      await slow.close();
    }
  });

  it("goes through the operator's proxy when one applies", async () => {
    const proxy = await startConnectProxy();
    try {
      const [result] = await provider({ proxy: { httpsProxy: proxy.url } }).send(notification(), [target()]);
      expect(result.ok).toBe(true);
      expect(proxy.targets()).toEqual([`127.0.0.1:${fake.port}`]);

      const [bypassed] = await provider({ proxy: { httpsProxy: proxy.url, noProxy: '127.0.0.1' } }).send(notification(), [target()]);
      expect(bypassed.ok).toBe(true);
      expect(proxy.connections).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it('reports a server that refuses connections as network', async () => {
    const gone = await FakeOneSignal.start();
    const origin = gone.origin;
    await gone.close();
    const [result] = await provider({ endpoint: origin, timeoutMs: 2000 }).send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('ECONNREFUSED') });
  });

  it('takes only an https origin as the endpoint', () => {
    expect(() => createOneSignalProvider({ appId: fake.appId, restApiKey: 'k', endpoint: 'http://127.0.0.1:1' })).toThrow('https origin');
    expect(() => createOneSignalProvider({ appId: fake.appId, restApiKey: 'k', endpoint: 'https://example.test/api' })).toThrow('https origin');
    const trailing = createOneSignalProvider({ appId: fake.appId, restApiKey: 'k', endpoint: `${fake.origin}/` });
    return trailing.close();
  });
});
