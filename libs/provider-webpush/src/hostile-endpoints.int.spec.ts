import { randomUUID } from 'node:crypto';
import { generateVAPIDKeys, type VapidKeys } from 'web-push';
import { parseAllowedOrigins, type AllowedOrigin } from '@operator/config';
import { FakePushService, pushAnswers, pushRequest, startConnectProxy, type ConnectProxy, type FakeSubscription } from '@operator/testing';
import type { PushProvider, SendResult, SendTarget } from '@operator/providers';
import { createWebPushProvider, CREDENTIALS_REFUSED_AFTER, MAX_ANSWER_BYTES, type WebPushProviderOptions } from './index';

// A subscription's endpoint is whatever a browser, or an attacker, said: these push services
// trickle, flood, redirect, refuse and ask for pauses, over real TLS sockets, and the provider
// gives each answer a bounded cost and the right scope.

const SUBJECT = 'mailto:push-ops@operator.example.test';
const MiB = 1024 * 1024;

function target(subscription: FakeSubscription, endpoint = subscription.endpoint): SendTarget {
  return { deliveryId: randomUUID(), token: endpoint, platform: 'web', p256dh: subscription.keys.p256dh, auth: subscription.keys.auth };
}

function notification() {
  return { pushId: randomUUID(), request: pushRequest(4242, 'player-7', { title: 'Reload', body: 'Spins waiting' }) };
}

function allowed(...origins: string[]): AllowedOrigin[] {
  const parsed = parseAllowedOrigins(origins.join(','));
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.origins;
}

/** The only subscription path of a fake's endpoint. */
const idOf = (subscription: FakeSubscription) => decodeURIComponent(new URL(subscription.endpoint).pathname.split('/').pop()!);

async function waitFor(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const failure = (klass: string, code: string, extra: object = {}) => ({ ok: false, error: { class: klass, code, message: expect.any(String), ...extra } });
const errorOf = (result: SendResult) => (result.ok ? undefined : result.error);

describe('web push provider against hostile endpoints', () => {
  let vapid: VapidKeys;
  const services: FakePushService[] = [];
  const providers: PushProvider[] = [];
  const proxies: ConnectProxy[] = [];

  async function service(): Promise<FakePushService> {
    const started = await FakePushService.start({ vapidPublicKey: vapid.publicKey });
    services.push(started);
    return started;
  }

  function provider(options: Partial<WebPushProviderOptions> & { allowedOrigins: AllowedOrigin[] }): PushProvider {
    const created = createWebPushProvider({ vapid: { ...vapid, subject: SUBJECT }, ca: services[0].ca, ...options });
    providers.push(created);
    return created;
  }

  beforeAll(() => {
    vapid = generateVAPIDKeys();
  });

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((created) => created.close()));
    await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
    await Promise.all(services.splice(0).map((started) => started.close()));
  });

  it('gives up on an answer that trickles a byte at a time, at the deadline for the whole request', async () => {
    const fake = await service();
    const subscription = fake.subscription();
    fake.respond(idOf(subscription), pushAnswers.trickle(100, 503));

    const started = Date.now();
    const [result] = await provider({ allowedOrigins: allowed(fake.origin), timeoutMs: 500 }).send(notification(), [target(subscription)]);
    const elapsed = Date.now() - started;

    expect(result).toEqual({ ok: false, error: { class: 'transient', code: 'network', message: 'timeout: no complete answer within 500 ms' } });
    // The trickle never ends: only the deadline ends the send. The margin is for a busy machine (a
    // fresh-clone CI run under the whole suite took 900 ms).
    expect(elapsed).toBeLessThan(500 + 2000);
    const [answer] = fake.requests;
    // Every byte came well within any idle timeout: only a deadline on the whole exchange stops it.
    expect(answer.bodyBytesWritten).toBeGreaterThanOrEqual(2);
    await waitFor(() => answer.finished);
  });

  it('takes a 201 at its status, whatever its body does next: the push is not sent again', async () => {
    const fake = await service();
    const subscription = fake.subscription();
    fake.respond(idOf(subscription), pushAnswers.trickle(100, 201));

    const started = Date.now();
    const [result] = await provider({ allowedOrigins: allowed(fake.origin), timeoutMs: 2000 }).send(notification(), [target(subscription)]);
    expect(result.ok).toBe(true);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('reads a few KiB of a 200 MiB answer and drops the connection on the rest', async () => {
    const fake = await service();
    const subscription = fake.subscription();
    fake.respond(idOf(subscription), pushAnswers.huge(200 * MiB));

    const [result] = await provider({ allowedOrigins: allowed(fake.origin) }).send(notification(), [target(subscription)]);

    expect(result).toEqual({ ok: true, providerMessageId: expect.stringMatching(/\/message\//) });
    const [answer] = fake.requests;
    await waitFor(() => answer.finished);
    // What the push service got onto the wire bounds what the provider could read: the socket
    // buffers' worth, not 200 MiB (the provider itself keeps MAX_ANSWER_BYTES of it).
    expect(MAX_ANSWER_BYTES).toBe(4096);
    expect(answer.bodyBytesWritten).toBeLessThan(16 * MiB);
  });

  it.each([301, 302, 307] as const)('takes a %i as the answer: nothing is sent where it points', async (status) => {
    const fake = await service();
    const elsewhere = await service();
    const subscription = fake.subscription();
    fake.respond(idOf(subscription), pushAnswers.redirect(status, elsewhere.endpoint(randomUUID())));

    // The redirect's target is even an allowed origin: a 3xx is still not followed.
    const [result] = await provider({ allowedOrigins: allowed(fake.origin, elsewhere.origin) }).send(notification(), [target(subscription)]);

    expect(result).toEqual(failure('payload', 'payload-invalid', { message: `HTTP ${status} (redirects are not followed)` }));
    expect(elsewhere.connections).toBe(0);
  });

  it('fails an endpoint outside the allowed origins without a connection, and keeps the device', async () => {
    const fake = await service();
    const subscription = fake.subscription();
    const web = provider({ allowedOrigins: allowed('https://push.example.test') });

    const results = await web.send(notification(), [
      target(subscription),
      target(subscription, 'https://169.254.169.254/latest/meta-data/iam'),
      target(subscription, `https://127.0.0.1:6379/push/x`),
      target(subscription, `https://push.example.test.evil.example/push/x`),
    ]);

    expect(results).toEqual(results.map(() => failure('payload', 'origin-not-allowed', { message: expect.stringMatching(/is not in WEBPUSH_ALLOWED_ORIGINS$/) })));
    expect(fake.connections).toBe(0);
  });

  it('refuses a name that resolves to a loopback address under an origin not named by a private address, before connecting', async () => {
    const fake = await service();
    const subscription = fake.subscription();
    const endpoint = subscription.endpoint.replace('127.0.0.1', 'localhost');
    // What a public name rebinding to 127.0.0.1 looks like: an origin the operator did not name by a private address.
    const rebinding: AllowedOrigin = { text: `https://localhost:${fake.port}`, host: 'localhost', wildcard: false, port: fake.port, privateAllowed: false };

    const [refused] = await provider({ allowedOrigins: [rebinding] }).send(notification(), [target(subscription, endpoint)]);

    expect(refused).toEqual(failure('payload', 'address-refused', { message: expect.stringMatching(/^refused: localhost resolves to 127\.0\.0\.1 \(loopback\)/) }));
    expect(fake.connections).toBe(0);

    // Named by the operator as localhost, the same endpoint is theirs to reach.
    const [sent] = await provider({ allowedOrigins: allowed(`https://localhost:${fake.port}`) }).send(notification(), [target(subscription, endpoint)]);
    expect(sent).toEqual({ ok: true, providerMessageId: expect.any(String) });
  });

  it('keeps a 429 to its subscription, with Retry-After cut to retryAfterMaxMs', async () => {
    const fake = await service();
    const limited = fake.subscription();
    const other = fake.subscription();
    fake.respond(idOf(limited), pushAnswers.retryAfter(429, 3600));
    const web = provider({ allowedOrigins: allowed(fake.origin), retryAfterMaxMs: 60_000 });

    expect(await web.send(notification(), [target(limited)])).toEqual([failure('transient', 'rate-limited', { message: 'HTTP 429', retryAfterMs: 60_000, scope: 'device' })]);
    // The origin is not paused: its other subscriptions are sent to.
    expect(await web.send(notification(), [target(other)])).toEqual([{ ok: true, providerMessageId: expect.any(String) }]);
  });

  it('pauses only the origin that answered 503 with Retry-After, for at most retryAfterMaxMs, without connecting meanwhile', async () => {
    const down = await service();
    const up = await service();
    const [first, second] = [down.subscription(), down.subscription()];
    const elsewhere = up.subscription();
    down.respond(idOf(first), pushAnswers.retryAfter(503, 3600));
    // Default retryAfterMaxMs: 300000.
    const web = provider({ allowedOrigins: allowed(down.origin, up.origin) });

    expect(await web.send(notification(), [target(first)])).toEqual([failure('transient', 'unavailable', { message: 'HTTP 503', retryAfterMs: 300_000, scope: 'origin' })]);
    const asked = down.requests.length;

    const results = await web.send(notification(), [target(second), target(elsewhere)]);

    expect(results[0]).toEqual(failure('transient', 'unavailable', { scope: 'origin', retryAfterMs: expect.any(Number), message: expect.stringMatching(/paused for \d+ s after HTTP 503$/) }));
    expect(errorOf(results[0])!.retryAfterMs).toBeGreaterThan(299_000);
    expect(errorOf(results[0])!.retryAfterMs).toBeLessThanOrEqual(300_000);
    expect(results[1]).toEqual({ ok: true, providerMessageId: expect.any(String) });
    expect(down.requests).toHaveLength(asked);
  });

  it('pauses an origin for a 5xx with a Retry-After; a 503 without one is about the origin, unpaused; a bare 5xx is about its delivery', async () => {
    const [withRetryAfter, bare503, bare500] = [await service(), await service(), await service()];
    const subscriptions = [withRetryAfter.subscription(), bare503.subscription(), bare500.subscription()];
    withRetryAfter.respond(idOf(subscriptions[0]), pushAnswers.retryAfter(500, 30));
    bare503.respond(idOf(subscriptions[1]), 503);
    bare500.respond(idOf(subscriptions[2]), 500);
    const web = provider({ allowedOrigins: allowed(withRetryAfter.origin, bare503.origin, bare500.origin) });

    expect(await web.send(notification(), subscriptions.map((s) => target(s)))).toEqual([
      failure('transient', 'unavailable', { message: 'HTTP 500', retryAfterMs: 30_000, scope: 'origin' }),
      failure('transient', 'unavailable', { message: 'HTTP 503', scope: 'origin' }),
      failure('transient', 'unavailable', { message: 'HTTP 500' }),
    ]);
    // Only the origin that said how long is left alone; the others are asked again.
    const again = await web.send(notification(), subscriptions.map((s) => target(s)));
    expect(again).toEqual([
      failure('transient', 'unavailable', { scope: 'origin', retryAfterMs: expect.any(Number), message: expect.stringMatching(/paused for 30 s after HTTP 500$/) }),
      { ok: true, providerMessageId: expect.any(String) },
      { ok: true, providerMessageId: expect.any(String) },
    ]);
    expect(withRetryAfter.requests).toHaveLength(1);
  });

  it('takes a 401 or a 403 of one subscription as about that subscription: never `auth`', async () => {
    const fake = await service();
    const unauthorized = fake.subscription();
    // Made with another application server key: the push service answers 403 to ours.
    const foreign = fake.subscription(randomUUID(), { applicationServerKey: generateVAPIDKeys().publicKey });
    fake.respond(idOf(unauthorized), { status: 401, body: '<html>Unauthorized</html>' });
    const web = provider({ allowedOrigins: allowed(fake.origin) });

    expect(await web.send(notification(), [target(unauthorized), target(foreign)])).toEqual([
      failure('payload', 'subscription-refused', { message: 'HTTP 401' }),
      failure('payload', 'subscription-refused', { message: 'HTTP 403' }),
    ]);
    // The same hostile subscription, however often it refuses, is one subscription.
    for (let i = 0; i < 3; i += 1) expect(await web.send(notification(), [target(foreign)])).toEqual([failure('payload', 'subscription-refused')]);
  });

  it('takes refusals of several distinct subscriptions of one origin, with no success between, as our credentials refused', async () => {
    const fake = await service();
    const foreignKey = generateVAPIDKeys().publicKey;
    const refusing = Array.from({ length: CREDENTIALS_REFUSED_AFTER + 1 }, () => fake.subscription(randomUUID(), { applicationServerKey: foreignKey }));
    const accepting = fake.subscription();
    const web = provider({ allowedOrigins: allowed(fake.origin) });
    const send = async (subscription: FakeSubscription) => (await web.send(notification(), [target(subscription)]))[0];

    expect(await send(refusing[0])).toEqual(failure('payload', 'subscription-refused'));
    expect(await send(refusing[1])).toEqual(failure('payload', 'subscription-refused'));
    expect(await send(refusing[2])).toEqual(failure('auth', 'auth', { message: `push service ${fake.origin} refused 3 subscriptions within 10 min and took none: HTTP 403` }));

    // A message the origin takes shows the credentials are good: counting starts again.
    expect(await send(accepting)).toEqual({ ok: true, providerMessageId: expect.any(String) });
    expect(await send(refusing[3])).toEqual(failure('payload', 'subscription-refused'));
  });

  it('sends through the operator proxy (HTTPS_PROXY), never around it', async () => {
    const fake = await service();
    const proxy = await startConnectProxy({ credentials: { username: 'egress', password: 'p@ss' } });
    proxies.push(proxy);
    const subscriptions = [fake.subscription(), fake.subscription(), fake.subscription()];
    const web = provider({ allowedOrigins: allowed(fake.origin), egress: { httpsProxy: proxy.url }, concurrency: 3 });

    const results = await web.send(notification(), subscriptions.map((s) => target(s)));

    expect(results).toEqual(subscriptions.map(() => ({ ok: true, providerMessageId: expect.any(String) })));
    expect(proxy.targets()).toEqual([`127.0.0.1:${fake.port}`]);
    // Every connection the push service accepted came through a tunnel.
    expect(fake.connections).toBe(proxy.connections.length);
    expect(proxy.connections.length).toBeGreaterThan(0);
  });

  it('stores what a push service said as a status and a short sanitised reason, never its raw body', async () => {
    const fake = await service();
    const secret = 'secret-token-4f2a9c';
    const html = `<html><body><script>alert(1)</script>${secret} at /etc/passwd ${'A'.repeat(3000)}</body></html>`;
    const statuses = [301, 400, 401, 403, 404, 410, 413, 429, 500, 502, 503];
    const subscriptions = statuses.map((status) => {
      const subscription = fake.subscription();
      fake.respond(idOf(subscription), { status, body: html, headers: status === 301 ? { Location: 'https://evil.example/' } : {} });
      return subscription;
    });
    const json = fake.subscription();
    fake.respond(idOf(json), { status: 400, body: JSON.stringify({ reason: `<b>BadJwtToken</b>\u001b[31m ${'x'.repeat(500)}` }) });
    const web = provider({ allowedOrigins: allowed(fake.origin) });

    const results = await web.send(notification(), [...subscriptions, json].map((s) => target(s)));

    const messages = results.map((result) => errorOf(result)!.message);
    expect(messages.slice(0, statuses.length)).toEqual(statuses.map((status) => (status === 301 ? 'HTTP 301 (redirects are not followed)' : `HTTP ${status}`)));
    const reason = messages[statuses.length];
    expect(reason).toMatch(/^HTTP 400: b BadJwtToken \/b \[31m x+…$/);
    expect(reason.length).toBeLessThanOrEqual(130);
    for (const message of messages) {
      expect(message).not.toContain(secret);
      expect(message).not.toMatch(/[<>\u001b]/);
    }
  });
});
