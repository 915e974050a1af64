import { randomUUID } from 'node:crypto';
import type { PushRequest } from '@operator/contract';
import { FakeHms, hmsAnswer, hmsToken, pushRequest, startConnectProxy, until, type FakeHmsOptions } from '@operator/testing';
import type { Notification, SendResult, SendTarget } from '@operator/providers';
import { createHmsProvider, type HmsProviderOptions } from './index';

// The HMS provider over real TLS sockets, to a local Push Kit that checks the OAuth grant (app id and
// secret), the Bearer token of every send, the message's shape and its token limit: what the fake
// received is what Huawei would receive.

function target(token = hmsToken()): SendTarget {
  return { deliveryId: randomUUID(), token, platform: 'android', p256dh: null, auth: null };
}

function notification(overrides: Partial<PushRequest> = {}, trackingToken?: string): Notification {
  return { pushId: randomUUID(), request: pushRequest(4242, 'player-7', overrides), ...(trackingToken ? { trackingToken } : {}) };
}

const failure = (result: SendResult) => (result.ok ? null : result.error);

describe('HMS provider against a local Push Kit over TLS', () => {
  const cleanup: (() => Promise<void>)[] = [];

  /** A fake Push Kit and a provider pointed at it (HMS_ENDPOINT), both closed after the test. */
  async function setup(fakeOptions: FakeHmsOptions = {}, providerOptions: Partial<HmsProviderOptions> = {}) {
    const fake = await FakeHms.start(fakeOptions);
    const provider = createHmsProvider({ appId: fake.appId, appSecret: fake.appSecret, endpoint: fake.origin, ca: fake.ca, ...providerOptions });
    cleanup.push(() => fake.close(), () => provider.close());
    return { fake, provider };
  }

  afterEach(async () => {
    // Last made, first closed: the provider before its fake, the fake before a proxy.
    for (const close of cleanup.splice(0).reverse()) await close();
  });

  it('sends 2,500 tokens in three requests of at most 1000, each token once, with the mapped fields', async () => {
    const { fake, provider } = await setup({ answerDelayMs: 50 });
    const push = notification(
      {
        title: 'Weekend reload',
        body: 'Your 50 free spins are waiting',
        image_url: 'https://cdn.example.test/promo/spins.png',
        android: {
          priority: 'high',
          ttl: '1h',
          collapse_key: '3',
          icon: 'ic_promo',
          color_rgb: 'ff0000',
          sound: 'coins.wav',
          tag: 'promo',
          click_action: 'https://casino.example.test/promo',
          body_loc_key: 'promo_body',
          body_loc_arcs: ['50', 'spins'],
          title_loc_keys: 'promo_title',
          title_loc_args: ['Weekend'],
          channel_id: 'promotions',
        },
      },
      'tracking-1',
    );
    const targets = Array.from({ length: 2500 }, () => target());
    const results = await provider.send(push, targets);

    expect(fake.requests.map((request) => request.tokens.length).sort()).toEqual([1000, 1000, 500]);
    // The three requests of one send went out together.
    expect(fake.peakInFlight).toBe(3);
    expect(fake.delivered).toHaveLength(2500);
    expect(new Set(fake.delivered.map((delivery) => delivery.token))).toEqual(new Set(targets.map((t) => t.token)));
    const requestOf = new Map(fake.delivered.map((delivery) => [delivery.token, delivery.requestId]));
    expect(results).toEqual(targets.map((t) => ({ ok: true, providerMessageId: requestOf.get(t.token) })));

    const [request] = fake.requests;
    expect(request).toMatchObject({ appId: fake.appId, validateOnly: false, status: 200, code: '80000000', contentType: 'application/json; charset=UTF-8' });
    expect(request.authorization).toBe(`Bearer ${fake.tokenGrants[0].accessToken}`);
    expect(fake.tokenGrants).toEqual([expect.objectContaining({ status: 200, clientId: fake.appId })]);
    expect(fake.delivered[0].message).toEqual({
      data: JSON.stringify({ push_id: push.pushId, tracking_token: 'tracking-1' }),
      android: {
        collapse_key: 3,
        urgency: 'HIGH',
        ttl: '3600s',
        notification: {
          title: 'Weekend reload',
          body: 'Your 50 free spins are waiting',
          image: 'https://cdn.example.test/promo/spins.png',
          icon: '/raw/ic_promo',
          color: '#FF0000',
          sound: '/raw/coins',
          tag: 'promo',
          channel_id: 'promotions',
          click_action: { type: 2, url: 'https://casino.example.test/promo' },
          body_loc_key: 'promo_body',
          body_loc_args: ['50', 'spins'],
          title_loc_key: 'promo_title',
          title_loc_args: ['Weekend'],
        },
      },
    });
  });

  it('sends the valid tokens of a batch and fails the invalid ones as dead, each once at Push Kit', async () => {
    const targets = Array.from({ length: 6 }, () => target());
    const invalid = [targets[1].token, targets[4].token];
    const { fake, provider } = await setup({ invalidTokens: invalid });
    const results = await provider.send(notification(), targets);

    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({ status: 200, code: '80100000' });
    const requestId = fake.requests[0].requestId;
    results.forEach((result, index) => {
      if (invalid.includes(targets[index].token)) expect(failure(result)).toEqual({ class: 'dead-token', code: 'invalid-token', message: 'Push Kit 80100000: the token is not valid for this app' });
      else expect(result).toEqual({ ok: true, providerMessageId: requestId });
    });
    for (const t of targets) {
      expect(fake.requests.flatMap((request) => request.tokens).filter((token) => token === t.token)).toHaveLength(1);
      expect(fake.deliveriesTo(t.token)).toHaveLength(invalid.includes(t.token) ? 0 : 1);
    }
  });

  it('fails every token as dead when Push Kit finds none valid', async () => {
    const { fake, provider } = await setup({ isInvalidToken: () => true });
    const results = await provider.send(notification(), [target(), target()]);
    expect(fake.requests[0]).toMatchObject({ status: 400, code: '80300007' });
    expect(results.map((result) => failure(result)?.code)).toEqual(['invalid-token', 'invalid-token']);
    expect(fake.delivered).toHaveLength(0);
  });

  it('renews an expired access token and sends once more, delivering once', async () => {
    const { fake, provider } = await setup();
    await provider.send(notification(), [target()]);
    fake.expireTokens();
    const t = target();
    const [result] = await provider.send(notification(), [t]);

    expect(result).toEqual({ ok: true, providerMessageId: expect.any(String) });
    expect(fake.grants).toBe(2);
    expect(fake.requests.slice(1).map((request) => [request.status, request.code])).toEqual([
      [401, '80200003'],
      [200, '80000000'],
    ]);
    expect(fake.deliveriesTo(t.token)).toHaveLength(1);
    expect(fake.requests[2].authorization).toBe(`Bearer ${fake.tokenGrants[1].accessToken}`);
  });

  it('renews an expired access token once for every send refused with it', async () => {
    const { fake, provider } = await setup();
    await provider.send(notification(), [target()]);
    fake.expireTokens();
    const results = await Promise.all(Array.from({ length: 8 }, () => provider.send(notification(), [target()])));
    expect(results.flat().every((result) => result.ok)).toBe(true);
    expect(fake.grants).toBe(2);
    expect(fake.delivered).toHaveLength(9);
  });

  it('fails as auth when the renewed access token is refused too', async () => {
    const { fake, provider } = await setup();
    fake.answerNext(hmsAnswer.error(401, '80200001', 'Oauth authentication error'), hmsAnswer.error(401, '80200001', 'Oauth authentication error'));
    const results = await provider.send(notification(), [target(), target()]);
    expect(results.map(failure)).toEqual([0, 1].map(() => ({ class: 'auth', code: 'auth', message: 'Push Kit 80200001 (HTTP 401, access token refused): Oauth authentication error' })));
    expect(fake.grants).toBe(2);
    expect(fake.requests).toHaveLength(2);
  });

  it('shares one grant among concurrent sends waiting for the access token', async () => {
    const { fake, provider } = await setup();
    const results = await Promise.all(Array.from({ length: 12 }, () => provider.send(notification(), [target()])));
    expect(results.flat().every((result) => result.ok)).toBe(true);
    expect(fake.grants).toBe(1);
    expect(fake.requests).toHaveLength(12);
  });

  it('renews the access token 5 minutes before it expires, or halfway through a short lifetime', async () => {
    let clock = Date.now();
    const { fake, provider } = await setup({ tokenLifetimeSeconds: 3600 }, { now: () => clock });
    await provider.send(notification(), [target()]);
    clock += 54 * 60_000;
    await provider.send(notification(), [target()]);
    expect(fake.grants).toBe(1);
    clock += 2 * 60_000;
    await provider.send(notification(), [target()]);
    expect(fake.grants).toBe(2);
    expect(fake.requests.every((request) => request.status === 200)).toBe(true);

    const short = await setup({ tokenLifetimeSeconds: 120 }, { now: () => clock });
    await short.provider.send(notification(), [target()]);
    clock += 59_000;
    await short.provider.send(notification(), [target()]);
    expect(short.fake.grants).toBe(1);
    clock += 2_000;
    await short.provider.send(notification(), [target()]);
    expect(short.fake.grants).toBe(2);
  });

  it('fails every target as auth when the app secret is refused, sending nothing', async () => {
    const { fake, provider } = await setup({}, { appSecret: 'not-the-secret' });
    const results = await provider.send(notification(), [target(), target(), target()]);
    expect(results.map(failure)).toEqual(
      [0, 1, 2].map(() => ({ class: 'auth', code: 'auth', message: 'token request answered HTTP 400: 1101/20003 invalid client' })),
    );
    expect(fake.tokenGrants).toEqual([expect.objectContaining({ status: 400, reason: 'invalid client' })]);
    expect(fake.requests).toHaveLength(0);
  });

  it("reads traffic control as the app's rate limit, with its Retry-After", async () => {
    const { fake, provider } = await setup();
    fake.answerNext(hmsAnswer.trafficControl(30));
    const results = await provider.send(notification(), [target(), target()]);
    expect(results.map(failure)).toEqual(
      [0, 1].map(() => ({ class: 'transient', code: 'rate-limited', message: 'HTTP 503, traffic control: Traffic control', retryAfterMs: 30_000, scope: 'credential' })),
    );
    expect(fake.delivered).toHaveLength(0);
  });

  it("reads Push Kit's internal error as transient for these devices only", async () => {
    const { fake, provider } = await setup();
    fake.answerNext(hmsAnswer.internalError());
    const [first] = await provider.send(notification(), [target()]);
    expect(failure(first)).toEqual({ class: 'transient', code: 'unavailable', message: 'Push Kit 81000001 (HTTP 500): System internal error' });
    // The next send is not held back by it.
    const [second] = await provider.send(notification(), [target()]);
    expect(second.ok).toBe(true);
  });

  it('refuses a message too large for Push Kit as payload-too-large', async () => {
    const { fake, provider } = await setup();
    const [result] = await provider.send(notification({ body: 'x'.repeat(4096) }), [target()]);
    expect(failure(result)).toEqual({ class: 'payload', code: 'payload-too-large', message: 'Push Kit 80300008 (HTTP 400): The message body size exceeds the default value' });
    expect(fake.delivered).toHaveLength(0);
  });

  it('gives up on a server that never answers as network, within timeoutMs', async () => {
    const { fake, provider } = await setup({}, { timeoutMs: 400 });
    fake.answerNext(hmsAnswer.silent());
    const started = Date.now();
    const [result] = await provider.send(notification(), [target()]);
    const took = Date.now() - started;
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('no complete answer within') });
    expect(took).toBeGreaterThanOrEqual(350);
    expect(took).toBeLessThan(2000);
    await until(() => fake.requests[0]?.cancelled, 'the request to be abandoned');
  });

  it('reads a network failure as transient', async () => {
    const { fake, provider } = await setup();
    fake.answerNext(hmsAnswer.hangUp());
    const [result] = await provider.send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network' });
  });

  it('reads at most the cap of a huge answer and keeps its status without its text', async () => {
    const { fake, provider } = await setup();
    const total = 64 * 1024 * 1024;
    fake.answerNext({ status: 200, text: '<html>internal path /srv/secret-name ', bodyBytes: total });
    const [result] = await provider.send(notification(), [target()]);
    expect(failure(result)).toEqual({ class: 'transient', code: 'unavailable', message: 'HTTP 200, answer cut: not an answer of Push Kit\'s' });
    await until(() => fake.requests[0]?.cancelled, 'the answer to be abandoned');
    await new Promise((resolve) => setTimeout(resolve, 100));
    // What the server got out before the connection went: the cap and the sockets' buffers, not 64 MiB.
    expect(fake.requests[0].answeredBytes).toBeLessThan(1024 * 1024);
  });

  it('reads at most the cap of a huge token answer', async () => {
    const { fake, provider } = await setup();
    fake.answerGrants({ status: 503, text: '<html>maintenance, secret=abc ', bodyBytes: 64 * 1024 * 1024 });
    const [result] = await provider.send(notification(), [target()]);
    expect(failure(result)).toEqual({ class: 'transient', code: 'unavailable', message: "token request answered HTTP 503: not an answer of Huawei's OAuth server" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fake.tokenGrants[0].answeredBytes).toBeLessThan(1024 * 1024);
  });

  it('keeps the requests in flight within maxConnections and concurrency', async () => {
    const { fake, provider } = await setup({ answerDelayMs: 100 }, { maxConnections: 2 });
    const results = await provider.send(notification(), Array.from({ length: 5000 }, () => target()));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.requests).toHaveLength(5);
    expect(fake.peakInFlight).toBe(2);

    const limited = await setup({ answerDelayMs: 50 }, { concurrency: 1 });
    await Promise.all([limited.provider.send(notification(), [target()]), limited.provider.send(notification(), [target()])]);
    expect(limited.fake.peakInFlight).toBe(1);
  });

  it('sends a token listed twice once, answering both targets, and never sends an empty token', async () => {
    const { fake, provider } = await setup();
    const token = hmsToken();
    const results = await provider.send(notification(), [target(token), target('  '), target(token)]);
    expect(results[0]).toEqual({ ok: true, providerMessageId: expect.any(String) });
    expect(results[2]).toEqual(results[0]);
    expect(failure(results[1])).toEqual({ class: 'dead-token', code: 'invalid-token', message: 'empty HMS push token' });
    expect(fake.requests.map((request) => request.tokens)).toEqual([[token]]);
  });

  it("goes through the operator's proxy, the token request and the sends", async () => {
    const proxy = await startConnectProxy();
    cleanup.push(() => proxy.close());
    const { fake, provider } = await setup({}, { proxy: { httpsProxy: proxy.url } });
    const [result] = await provider.send(notification(), [target()]);
    expect(result.ok).toBe(true);
    expect(fake.grants).toBe(1);
    expect(proxy.connections.every((connection) => connection.method === 'CONNECT')).toBe(true);
    expect(proxy.targets()).toEqual([`127.0.0.1:${fake.port}`]);
  });

  it('answers nothing to send once closed', async () => {
    const { provider } = await setup();
    await provider.close();
    await expect(provider.send(notification(), [target()])).rejects.toThrow('closed');
  });
});
