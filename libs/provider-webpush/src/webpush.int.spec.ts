import { createPrivateKey, randomUUID, sign } from 'node:crypto';
import https from 'node:https';
import { generateRequestDetails, generateVAPIDKeys, getVapidHeaders, type VapidKeys } from 'web-push';
import { parseAllowedOrigins, type AllowedOrigin } from '@operator/config';
import type { PushRequest } from '@operator/contract';
import { FakePushService, pushRequest, type FakeSubscription } from '@operator/testing';
import type { PushProvider, SendTarget } from '@operator/providers';
import { createWebPushProvider, type WebPushProviderOptions } from './index';

// Web Push over real TLS sockets to a local push service that verifies VAPID and decrypts the
// aes128gcm body: what arrives is what a service worker would pass to showNotification().

const SUBJECT = 'mailto:push-ops@operator.example.test';

function target(subscription: FakeSubscription): SendTarget {
  return { deliveryId: randomUUID(), token: subscription.endpoint, platform: 'web', p256dh: subscription.keys.p256dh, auth: subscription.keys.auth };
}

function notification(overrides: Partial<PushRequest> = {}) {
  return { pushId: randomUUID(), request: pushRequest(4242, 'player-7', overrides) };
}

/** WEBPUSH_ALLOWED_ORIGINS naming these origins (127.0.0.1 ones: the operator's own, private addresses allowed). */
function allowed(...origins: string[]): AllowedOrigin[] {
  const parsed = parseAllowedOrigins(origins.join(','));
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.origins;
}

async function waitFor(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('web push provider against a local push service', () => {
  let fake: FakePushService;
  let vapid: VapidKeys;
  const providers: PushProvider[] = [];

  /** A provider trusting the test CA (never by turning verification off), allowed to send to `service`. */
  function provider(options: Partial<WebPushProviderOptions> = {}, service = fake): PushProvider {
    const created = createWebPushProvider({
      vapid: { ...vapid, subject: SUBJECT },
      ca: service.ca,
      allowedOrigins: allowed(service.origin),
      ...options,
    });
    providers.push(created);
    return created;
  }

  beforeAll(async () => {
    vapid = generateVAPIDKeys();
    fake = await FakePushService.start({ vapidPublicKey: vapid.publicKey });
  });

  afterAll(async () => {
    await Promise.all(providers.map((created) => created.close()));
    await fake.close();
  });

  it('delivers every web field, encrypted and VAPID-signed, as showNotification arguments with push_id', async () => {
    const subscription = fake.subscription();
    const id = new URL(subscription.endpoint).pathname.split('/').pop()!;
    const push = notification({
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.test/reload.png',
      web: {
        icon: 'https://cdn.example.test/icon.png',
        badge: 'https://cdn.example.test/badge.png',
        dir: 'rtl',
        lang: 'he-IL',
        renotify: 'true',
        require_interaction: 'TRUE',
        silent: 'false',
        tag: 'reload-weekend',
        timestamp: 1_735_689_600,
        vibrate: ['200', '100', '200'],
        link: 'https://casino.example.test/promo?x=1',
      },
    });

    const [result] = await provider().send(push, [target(subscription)]);

    const [message] = fake.receivedFor(id);
    expect(result).toEqual({ ok: true, providerMessageId: message.location });
    expect(message.location).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/message\//);
    expect(message.payload).toEqual({
      title: 'Weekend reload',
      options: {
        body: 'Your 50 free spins are waiting',
        icon: 'https://cdn.example.test/icon.png',
        badge: 'https://cdn.example.test/badge.png',
        image: 'https://cdn.example.test/reload.png',
        dir: 'rtl',
        lang: 'he-IL',
        renotify: true,
        requireInteraction: true,
        silent: false,
        tag: 'reload-weekend',
        timestamp: 1_735_689_600_000,
        vibrate: [200, 100, 200],
        data: { push_id: push.pushId, link: 'https://casino.example.test/promo?x=1' },
      },
      push_id: push.pushId,
    });
    expect(message).toMatchObject({ ttl: 86_400, urgency: 'normal', topic: undefined, vapidKey: vapid.publicKey, vapidSubject: SUBJECT });
  });

  it('sends only title, body and push_id when the request has no web fields, with the configured TTL', async () => {
    const subscription = fake.subscription('plain');
    const push = notification({ title: 'Hi', body: 'Plain' });

    expect(await provider({ ttlSeconds: 60 }).send(push, [target(subscription)])).toEqual([{ ok: true, providerMessageId: expect.any(String) }]);

    const [message] = fake.receivedFor('plain');
    expect(message.payload).toEqual({ title: 'Hi', options: { body: 'Plain', data: { push_id: push.pushId } }, push_id: push.pushId });
    expect(message.ttl).toBe(60);
  });

  describe('the fake push service checks what a real one checks', () => {
    let subscription: FakeSubscription;
    let details: { headers: Record<string, string | number>; body: Buffer };

    beforeAll(() => {
      subscription = fake.subscription('raw');
      const generated = generateRequestDetails(subscription, JSON.stringify({ title: 'raw' }), {
        vapidDetails: { ...vapid, subject: SUBJECT },
        TTL: 30,
        contentEncoding: 'aes128gcm',
      });
      details = { headers: generated.headers as Record<string, string | number>, body: generated.body! };
    });

    function post(headers: Record<string, string | number | undefined>, body: Buffer = details.body): Promise<number> {
      const sent = Object.fromEntries(Object.entries({ ...headers, 'Content-Length': body.length }).filter(([, value]) => value !== undefined));
      return new Promise((resolve, reject) => {
        const req = https.request(subscription.endpoint, { method: 'POST', headers: sent, ca: fake.ca, agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end(body);
      });
    }

    const authorization = (token: string, key = vapid.publicKey) => `vapid t=${token}, k=${key}`;
    const tokenOf = (header: string) => /t=([^,\s]+)/.exec(header)![1];
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

    /** A JWT signed by hand with the VAPID private key, for claims web-push refuses to make. */
    function selfSigned(claims: Record<string, unknown>, keys = vapid): string {
      const publicKey = Buffer.from(keys.publicKey, 'base64url');
      const key = createPrivateKey({
        format: 'jwk',
        key: {
          kty: 'EC',
          crv: 'P-256',
          x: publicKey.subarray(1, 33).toString('base64url'),
          y: publicKey.subarray(33).toString('base64url'),
          d: keys.privateKey,
        },
      });
      const signed = `${b64({ typ: 'JWT', alg: 'ES256' })}.${b64(claims)}`;
      return `${signed}.${sign('sha256', Buffer.from(signed), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
    }

    it('accepts the request web-push builds, and a hand-signed one with valid claims', async () => {
      expect(await post(details.headers)).toBe(201);
      const exp = Math.floor(Date.now() / 1000) + 3600;
      expect(await post({ ...details.headers, Authorization: authorization(selfSigned({ aud: fake.origin, exp, sub: SUBJECT })) })).toBe(201);
      expect(fake.receivedFor('raw').map((message) => message.payload)).toEqual([{ title: 'raw' }, { title: 'raw' }]);
    });

    it('refuses a missing, tampered, foreign or expired VAPID token with 401', async () => {
      const now = Math.floor(Date.now() / 1000);
      const token = tokenOf(String(details.headers.Authorization));
      const [head, claims, signature] = token.split('.');
      const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
      const other = generateVAPIDKeys();
      const cases: Record<string, string | undefined> = {
        absent: undefined,
        'not the vapid scheme': `WebPush ${token}`,
        'signature altered': authorization(`${head}.${claims}.${flipped}`),
        'claims altered after signing': authorization(`${head}.${b64({ aud: fake.origin, exp: now + 7200, sub: 'mailto:evil@example.test' })}.${signature}`),
        'signed by another key than k=': authorization(tokenOf(getVapidHeaders(fake.origin, SUBJECT, other.publicKey, other.privateKey, 'aes128gcm').Authorization)),
        'aud of another origin': authorization(tokenOf(getVapidHeaders('https://push.example.test', SUBJECT, vapid.publicKey, vapid.privateKey, 'aes128gcm').Authorization)),
        expired: authorization(tokenOf(getVapidHeaders(fake.origin, SUBJECT, vapid.publicKey, vapid.privateKey, 'aes128gcm', now - 5).Authorization)),
        'exp more than 24 h away': authorization(selfSigned({ aud: fake.origin, exp: now + 25 * 3600, sub: SUBJECT })),
        'no sub': authorization(selfSigned({ aud: fake.origin, exp: now + 3600 })),
      };
      const statuses = Object.fromEntries(
        await Promise.all(Object.entries(cases).map(async ([name, value]) => [name, await post({ ...details.headers, Authorization: value })] as const)),
      );
      expect(statuses).toEqual(Object.fromEntries(Object.keys(cases).map((name) => [name, 401])));
      // Refused for the reasons meant, not by accident.
      expect(new Set(fake.requests.slice(-9).map((request) => request.reason))).toEqual(
        new Set([
          'no Authorization',
          'Authorization is not the vapid scheme',
          'JWT signature does not verify with k=',
          `JWT aud https://push.example.test is not ${fake.origin}`,
          'JWT expired or without exp',
          'JWT exp more than 24 hours away',
          'JWT sub missing or not mailto:/https:',
        ]),
      );
    });

    it('refuses a valid token of a key the subscription was not made with, with 403', async () => {
      const other = generateVAPIDKeys();
      const foreign = getVapidHeaders(fake.origin, SUBJECT, other.publicKey, other.privateKey, 'aes128gcm').Authorization;
      expect(await post({ ...details.headers, Authorization: foreign })).toBe(403);
    });

    it('refuses a body that does not decrypt with the subscription keys, and a missing TTL, with 400', async () => {
      const altered = Buffer.from(details.body);
      altered[altered.length - 20] ^= 0xff;
      const forOther = generateRequestDetails(fake.subscription(), 'hello', { vapidDetails: { ...vapid, subject: SUBJECT }, contentEncoding: 'aes128gcm' });
      expect(await post(details.headers, altered)).toBe(400);
      expect(await post(details.headers, forOther.body!)).toBe(400);
      expect(await post({ ...details.headers, TTL: undefined })).toBe(400);
      expect(await post({ ...details.headers, 'Content-Encoding': 'aesgcm' })).toBe(400);
    });
  });

  it('answers one result per device, in order, mapping each push service answer', async () => {
    const web = provider({ concurrency: 4 });
    const ids = ['ok', 'gone', 'notfound', 'limited', 'down', 'gateway', 'big', 'forbidden', 'bad', 'unsubscribed', 'timeout'].map((name) => `${name}-${randomUUID()}`);
    const [ok, gone, notFound, limited, down, gateway, big, forbidden, bad, unsubscribed, timeout] = ids;
    const subscriptions = ids.map((id) => fake.subscription(id));
    fake.respond(gone, 410);
    fake.respond(notFound, { status: 404, body: 'subscription expired' });
    fake.respond(limited, { status: 429, headers: { 'Retry-After': '3' } });
    fake.respond(down, 500);
    fake.respond(gateway, 502);
    fake.respond(big, 413);
    fake.respond(forbidden, 403);
    fake.respond(bad, { status: 400, body: '{"reason":"BadPayload"}' });
    fake.respond(timeout, 408);
    fake.unsubscribe(unsubscribed);
    const noKeys: SendTarget = { ...target(fake.subscription()), p256dh: null, auth: null };
    const notHttps: SendTarget = { ...target(fake.subscription()), token: 'http://127.0.0.1/push/x' };
    const push = notification();

    const results = await web.send(push, [...subscriptions.map(target), noKeys, notHttps]);

    const failure = (klass: string, code: string, extra: object = {}) => ({ ok: false, error: { class: klass, code, message: expect.any(String), ...extra } });
    expect(results).toEqual([
      { ok: true, providerMessageId: expect.stringMatching(/\/message\//) },
      failure('dead-token', 'unregistered', { message: 'HTTP 410' }),
      failure('dead-token', 'unregistered', { message: 'HTTP 404' }),
      failure('transient', 'rate-limited', { retryAfterMs: 3000, scope: 'device' }),
      failure('transient', 'unavailable', { message: 'HTTP 500' }),
      failure('transient', 'unavailable', { message: 'HTTP 502' }),
      failure('payload', 'payload-too-large'),
      // One subscription refusing us is about that subscription, not our credentials.
      failure('payload', 'subscription-refused', { message: 'HTTP 403' }),
      failure('payload', 'payload-invalid', { message: 'HTTP 400: BadPayload' }),
      failure('dead-token', 'unregistered', { message: 'HTTP 410' }),
      failure('transient', 'unavailable', { message: 'HTTP 408' }),
      failure('dead-token', 'invalid-token'),
      failure('dead-token', 'invalid-token'),
    ]);
    // A bare 5xx waits for that delivery only: no Retry-After, no origin scope.
    expect(results[4]).toEqual({ ok: false, error: { class: 'transient', code: 'unavailable', message: 'HTTP 500' } });
    expect(fake.receivedFor(ok)).toHaveLength(1);

    // The transient ones succeed on the next send; the scripted answers were used up.
    expect(await web.send(push, [target(subscriptions[ids.indexOf(down)]), target(subscriptions[ids.indexOf(limited)])])).toEqual([
      { ok: true, providerMessageId: expect.any(String) },
      { ok: true, providerMessageId: expect.any(String) },
    ]);
    expect(fake.receivedFor(down).map((message) => (message.payload as { push_id: string }).push_id)).toEqual([push.pushId]);
  });

  it('refuses a payload larger than a push service must accept without sending it', async () => {
    const subscription = fake.subscription('huge');
    const before = fake.requests.length;
    const [result] = await provider().send(notification({ body: 'x'.repeat(4000) }), [target(subscription)]);
    expect(result).toEqual({ ok: false, error: expect.objectContaining({ class: 'payload', code: 'payload-too-large' }) });
    expect(fake.requests.length).toBe(before);
  });

  it('reports a push service that is gone, hangs up or does not answer in time as a network failure', async () => {
    const closed = await FakePushService.start();
    const closedSubscription = closed.subscription();
    await closed.close();
    const slow = fake.subscription('slow');
    const hangUp = fake.subscription('hang-up');
    fake.respond('slow', { status: 201, delayMs: 2000 });
    fake.respond('hang-up', { status: 201, hangUp: true });

    const started = Date.now();
    const results = await provider({ timeoutMs: 200, allowedOrigins: allowed(fake.origin, closed.origin) }).send(notification(), [target(closedSubscription), target(slow), target(hangUp)]);

    expect(results).toEqual([
      { ok: false, error: { class: 'transient', code: 'network', message: expect.stringMatching(/ECONNREFUSED/) } },
      { ok: false, error: { class: 'transient', code: 'network', message: 'timeout: no complete answer within 200 ms' } },
      { ok: false, error: { class: 'transient', code: 'network', message: expect.any(String) } },
    ]);
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('reuses keep-alive TLS connections across sends and releases them on close', async () => {
    const service = await FakePushService.start();
    try {
      const web = provider({ concurrency: 2 }, service);
      const one = service.subscription();
      for (let i = 0; i < 10; i += 1) {
        expect(await web.send(notification(), [target(one)])).toEqual([{ ok: true, providerMessageId: expect.any(String) }]);
      }
      // undici takes a connection back into its pool a moment after the answer's last byte, so a
      // send right behind another may open a second connection; both are kept and reused.
      expect(service.tlsConnections).toBeLessThanOrEqual(2);

      const many = Array.from({ length: 12 }, () => target(service.subscription()));
      expect((await web.send(notification(), many)).every((result) => result.ok)).toBe(true);
      expect(service.received).toHaveLength(22);
      expect(service.tlsConnections).toBeLessThanOrEqual(4);
      expect(service.openConnections).toBeGreaterThan(0);

      await web.close();
      await waitFor(() => service.openConnections === 0);
      await expect(web.send(notification(), [target(one)])).rejects.toThrow(/closed/);
      await web.close();
    } finally {
      await service.close();
    }
  });
});
