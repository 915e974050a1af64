import { randomUUID } from 'node:crypto';
import { apnsToken, FakeApns, pushRequest, startConnectProxy, testTls, uniqueName, until, type ConnectProxy, type ConnectProxyOptions } from '@operator/testing';
import type { PushProvider, SendResult, SendTarget } from '@operator/providers';
import { createApnsProvider, type ApnsProviderOptions } from './index';

// The provider's transport over real sockets: its HTTP/2 connection through the operator's proxy
// (a CONNECT tunnel), one deadline for a whole send, and a cap on what is read of an answer,
// which is kept as its status and a sanitised reason.

const target = (token: string): SendTarget => ({ deliveryId: uniqueName('delivery'), token, platform: 'ios', p256dh: null, auth: null });
const failure = (result: SendResult) => (result.ok ? undefined : result.error);

describe('APNs transport', () => {
  let fake: FakeApns;
  let proxy: ConnectProxy | undefined;
  const providers: PushProvider[] = [];

  const provider = (overrides: Partial<ApnsProviderOptions> = {}) => {
    const made = createApnsProvider({
      key: fake.key,
      keyId: fake.keyId,
      teamId: fake.teamId,
      topic: 'com.example.casino',
      production: false,
      host: fake.host,
      port: fake.port,
      ca: testTls().ca,
      ...overrides,
    });
    providers.push(made);
    return made;
  };
  const send = (apns: PushProvider, tokens: string[]) => apns.send({ pushId: randomUUID(), request: pushRequest(7, 'player-1') }, tokens.map(target));
  const startProxy = async (options: ConnectProxyOptions = {}) => (proxy = await startConnectProxy(options));

  beforeEach(async () => {
    fake = await FakeApns.start();
  });

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((made) => made.close()));
    await proxy?.close();
    proxy = undefined;
    await fake.close();
  });

  describe('through the operator proxy', () => {
    it('sends through HTTPS_PROXY with its credentials, every send on one tunnel', async () => {
      await startProxy({ credentials: { username: 'egress', password: 'p@ss:w0rd' } });
      const apns = provider({ proxy: { httpsProxy: proxy!.url } });
      const tokens = [apnsToken(), apnsToken(), apnsToken()];
      const results = await send(apns, tokens);
      expect(results.every((result) => result.ok)).toBe(true);
      expect((await send(apns, [apnsToken()]))[0].ok).toBe(true);
      expect(proxy!.targets()).toEqual([`127.0.0.1:${fake.port}`]);
      expect(proxy!.connections).toHaveLength(1);
      expect(fake.requests.map((seen) => seen.status)).toEqual([200, 200, 200, 200]);
      expect(fake.sessions).toBe(1);
    });

    it('asks the proxy for the APNs host by name', async () => {
      await startProxy({ resolve: () => `127.0.0.1:${fake.port}` });
      const [result] = await send(provider({ host: undefined, port: undefined, proxy: { httpsProxy: proxy!.url } }), [apnsToken()]);
      expect(result.ok).toBe(true);
      expect(proxy!.targets()).toEqual(['api.sandbox.push.apple.com:443']);
    });

    it('goes direct to a host NO_PROXY names', async () => {
      await startProxy();
      const [result] = await send(provider({ proxy: { httpsProxy: proxy!.url, noProxy: '127.0.0.1' } }), [apnsToken()]);
      expect(result.ok).toBe(true);
      expect(proxy!.connections).toEqual([]);
    });

    it('a proxy refusing the tunnel is a network error at once for every target, and nothing reaches APNs', async () => {
      await startProxy({ credentials: { username: 'egress', password: 'right' } });
      const started = Date.now();
      const results = await send(provider({ proxy: { httpsProxy: proxy!.url.replace('right', 'wrong') } }), [apnsToken(), apnsToken()]);
      for (const result of results) expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('answered 407 to CONNECT') });
      expect(Date.now() - started).toBeLessThan(1000);
      expect(proxy!.refused).toEqual([`127.0.0.1:${fake.port}`]);
      expect(fake.requests).toEqual([]);
    });

    it('a proxy that never opens the tunnel is a network error at the deadline', async () => {
      await startProxy({ hold: () => true });
      const started = Date.now();
      const results = await send(provider({ proxy: { httpsProxy: proxy!.url }, timeoutMs: 500 }), [apnsToken(), apnsToken()]);
      for (const result of results) expect(failure(result)).toMatchObject({ class: 'transient', code: 'network' });
      expect(Date.now() - started).toBeLessThan(1500);
      expect(proxy!.held).toEqual([`127.0.0.1:${fake.port}`]);
    });
  });

  describe('answers, bounded', () => {
    it('an answer that never finishes is a network error at the deadline for every target, its stream cancelled', async () => {
      const tokens = [apnsToken(), apnsToken(), apnsToken()];
      for (const token of tokens) fake.respond(token, { status: 200, stall: true });
      const started = Date.now();
      const results = await send(provider({ timeoutMs: 500 }), tokens);
      for (const result of results) expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('500 ms') });
      expect(Date.now() - started).toBeLessThan(1500);
      await until(() => fake.requests.every((seen) => seen.cancelled), 'the streams to be cancelled');
      // Each answer had begun (a byte every 100 ms): node-apn's idle timer alone would wait for ever.
      expect(fake.requests.every((seen) => seen.answeredBytes >= 3)).toBe(true);
    });

    it('reads a few KiB of a huge answer, cancels the rest, and keeps its status without its text', async () => {
      const token = apnsToken();
      fake.respond(token, { status: 400, text: '<html>internal path /srv/secret-name ', bodyBytes: 64 * 1024 * 1024 });
      const [result] = await send(provider(), [token]);
      expect(failure(result)).toEqual({ class: 'payload', code: 'payload-invalid', message: 'APNs 400 (an answer longer than 8192 bytes)' });
      await until(() => fake.requests[0]?.cancelled, 'the stream to be cancelled');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(fake.requests[0].answeredBytes).toBeLessThan(1024 * 1024);
    });

    it('keeps an answer that is not JSON, or a reason with markup, without the raw text', async () => {
      const [page, markup] = [apnsToken(), apnsToken()];
      fake.respond(page, { status: 502, text: '<html><body>Bad gateway: upstream token=sk_live_5x2</body></html>' });
      fake.respond(markup, { status: 400, reason: `<script>alert("x")</script>\u001b[31m ${'very long '.repeat(200)}` });
      const [pageResult, markupResult] = await send(provider(), [page, markup]);
      expect(failure(pageResult)).toEqual({ class: 'transient', code: 'network', message: 'APNs: APNs answered 502 with a body that is not JSON' });
      const said = failure(markupResult)!;
      expect(said).toMatchObject({ class: 'payload', code: 'payload-invalid', message: expect.stringMatching(/^APNs 400 script alert\( x \) \/script/) });
      expect(said.message).not.toMatch(/[<>"\u001b]/);
      expect(said.message.length).toBeLessThan(200);
    });
  });
});
