import { generateKeyPairSync, randomUUID } from 'node:crypto';
import type { PushRequest } from '@operator/contract';
import { apnsToken, pushRequest, testTls, uniqueName } from '@operator/testing';
// Not exported from @operator/testing yet.
import { FakeApns, type ApnsAnswer } from '@operator/testing';
import type { PushProvider, SendResult, SendTarget } from '@operator/providers';
import { apnsError, createApnsProvider, type ApnsProviderOptions } from './index';

const TOPIC = 'com.example.casino';

const target = (token: string): SendTarget => ({ deliveryId: uniqueName('delivery'), token, platform: 'ios', p256dh: null, auth: null });
const request = (overrides: Partial<PushRequest> = {}) => pushRequest(7, 'player-1', overrides);
const otherKey = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
const failure = (result: SendResult) => (result.ok ? undefined : result.error);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await sleep(10);
  }
}

describe('APNs provider over HTTP/2 + TLS against the local fake', () => {
  let fake: FakeApns;
  const providers: PushProvider[] = [];

  const options = (overrides: Partial<ApnsProviderOptions> = {}): ApnsProviderOptions => ({
    key: fake.key,
    keyId: fake.keyId,
    teamId: fake.teamId,
    topic: TOPIC,
    production: false,
    host: fake.host,
    port: fake.port,
    ca: testTls().ca,
    ...overrides,
  });
  const provider = (overrides: Partial<ApnsProviderOptions> = {}) => {
    const made = createApnsProvider(options(overrides));
    providers.push(made);
    return made;
  };
  const send = (apns: PushProvider, tokens: string[], overrides: Partial<PushRequest> = {}, pushId: string = randomUUID()) =>
    apns.send({ pushId, request: request(overrides) }, tokens.map(target));

  beforeEach(async () => {
    fake = await FakeApns.start();
  });

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((made) => made.close()));
    await fake.close();
  });

  describe('payload and headers', () => {
    it('maps every iOS field into aps, with push_id and image_url beside it, and sends APNs headers', async () => {
      const apns = provider();
      const token = apnsToken();
      const pushId = randomUUID();
      const before = Math.floor(Date.now() / 1000);
      const [result] = await send(
        apns,
        [token],
        {
          title: 'Weekend reload',
          body: 'Your 50 free spins are waiting',
          image_url: 'https://cdn.example.test/spins.png',
          android: { ttl: '1h', priority: 'normal', collapse_key: 'weekend' },
          ios: {
            badge: '3',
            category: 'BONUS',
            thread_id: 'weekend-thread',
            sub_title: 'Only this weekend',
            loc_key: 'BODY_KEY',
            loc_args: ['50', 'spins'],
            title_loc_key: 'TITLE_KEY',
            title_loc_args: ['Ann'],
            sub_title_loc_key: 'SUBTITLE_KEY',
            sub_title_loc_args: ['Sat'],
            action_loc_key: 'PLAY',
            launch_image: 'launch.png',
          },
        },
        pushId,
      );
      const after = Math.floor(Date.now() / 1000);

      expect(fake.requests).toHaveLength(1);
      const [seen] = fake.requests;
      expect(seen).toMatchObject({ method: 'POST', path: `/3/device/${token}`, token, status: 200 });
      expect(seen.body).toEqual({
        aps: {
          alert: {
            title: 'Weekend reload',
            body: 'Your 50 free spins are waiting',
            subtitle: 'Only this weekend',
            'loc-key': 'BODY_KEY',
            'loc-args': ['50', 'spins'],
            'title-loc-key': 'TITLE_KEY',
            'title-loc-args': ['Ann'],
            'subtitle-loc-key': 'SUBTITLE_KEY',
            'subtitle-loc-args': ['Sat'],
            'action-loc-key': 'PLAY',
            'launch-image': 'launch.png',
          },
          badge: 3,
          category: 'BONUS',
          'thread-id': 'weekend-thread',
          'mutable-content': 1,
        },
        push_id: pushId,
        image_url: 'https://cdn.example.test/spins.png',
      });
      expect(seen.topic).toBe(TOPIC);
      expect(seen.pushType).toBe('alert');
      expect(seen.priority).toBe('10');
      expect(seen.collapseId).toBeUndefined();
      const expiration = Number(seen.expiration);
      expect(expiration).toBeGreaterThanOrEqual(before + 3600);
      expect(expiration).toBeLessThanOrEqual(after + 3600);
      // The fake only answers 200 to a provider token signed with its key, kid and iss.
      expect(seen.authorization).toMatch(/^bearer [\w-]+\.[\w-]+\.[\w-]+$/);
      const [header, claims] = seen.authorization!.slice('bearer '.length).split('.').slice(0, 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()));
      expect(header).toMatchObject({ alg: 'ES256', kid: fake.keyId });
      expect(claims).toMatchObject({ iss: fake.teamId });
      expect(result).toEqual({ ok: true, providerMessageId: seen.responseApnsId });
    });

    it('sends a minimal push with just the alert and push_id, and no expiration', async () => {
      const apns = provider();
      const token = apnsToken();
      const pushId = randomUUID();
      const [result] = await send(apns, [token], { title: 'Hi', body: 'There' }, pushId);
      expect(result.ok).toBe(true);
      const [seen] = fake.requests;
      expect(seen.body).toEqual({ aps: { alert: { title: 'Hi', body: 'There' } }, push_id: pushId });
      expect(seen.expiration).toBeUndefined();
      expect(seen.priority).toBe('10');
    });

    it('leaves out a badge that is not a count, and sends ttl 0 as expiration 0 (deliver now or never)', async () => {
      const apns = provider();
      await send(apns, [apnsToken()], { ios: { badge: 'many' }, android: { ttl: '0' } });
      const [seen] = fake.requests;
      expect((seen.body as { aps: Record<string, unknown> }).aps).not.toHaveProperty('badge');
      expect(seen.expiration).toBe('0');
    });
  });

  describe('results per device', () => {
    it('maps a mix of answers in one send back to the targets in order', async () => {
      const apns = provider();
      const scripted: [string, ApnsAnswer | null][] = [
        [apnsToken(), null],
        [apnsToken(), { status: 410, reason: 'Unregistered', timestamp: Date.now() - 60_000 }],
        [apnsToken(), { status: 400, reason: 'BadDeviceToken' }],
        [apnsToken(), { status: 400, reason: 'DeviceTokenNotForTopic' }],
        [apnsToken(), { status: 429, reason: 'TooManyRequests', headers: { 'retry-after': '7' } }],
        [apnsToken(), { status: 429, reason: 'TooManyRequests' }],
        [apnsToken(), { status: 500, reason: 'InternalServerError' }],
        [apnsToken(), { status: 503, reason: 'ServiceUnavailable' }],
        [apnsToken(), { status: 400, reason: 'BadExpirationDate' }],
        [apnsToken(), { status: 400, reason: 'TopicDisallowed' }],
        [apnsToken(), { status: 429, reason: 'TooManyProviderTokenUpdates', headers: { 'retry-after': '60' } }],
      ];
      for (const [token, answer] of scripted) if (answer) fake.respond(token, answer);

      const results = await send(apns, scripted.map(([token]) => token));

      expect(fake.requests).toHaveLength(scripted.length);
      expect(results[0]).toEqual({ ok: true, providerMessageId: fake.requestsFor(scripted[0][0])[0].responseApnsId });
      expect(results.slice(1).map(failure)).toEqual([
        { class: 'dead-token', code: 'unregistered', message: 'APNs 410 Unregistered' },
        { class: 'dead-token', code: 'invalid-token', message: 'APNs 400 BadDeviceToken' },
        { class: 'dead-token', code: 'invalid-token', message: 'APNs 400 DeviceTokenNotForTopic' },
        { class: 'transient', code: 'rate-limited', message: 'APNs 429 TooManyRequests', retryAfterMs: 7000, scope: 'device' },
        { class: 'transient', code: 'rate-limited', message: 'APNs 429 TooManyRequests', scope: 'device' },
        { class: 'transient', code: 'unavailable', message: expect.stringContaining('APNs 500 InternalServerError') },
        { class: 'transient', code: 'unavailable', message: 'APNs 503 ServiceUnavailable' },
        { class: 'payload', code: 'payload-invalid', message: 'APNs 400 BadExpirationDate' },
        { class: 'auth', code: 'auth', message: 'APNs 400 TopicDisallowed' },
        { class: 'transient', code: 'rate-limited', message: 'APNs 429 TooManyProviderTokenUpdates', retryAfterMs: 60_000, scope: 'credential' },
      ]);
    });

    it('gives up on an answer slower than timeoutMs (PUSH_SEND_TIMEOUT_MS) as a network failure', async () => {
      const apns = provider({ timeoutMs: 300 });
      const token = apnsToken();
      fake.respond(token, { status: 200, delayMs: 3000 });
      const started = Date.now();
      expect(failure((await send(apns, [token]))[0])).toMatchObject({ code: 'network' });
      expect(Date.now() - started).toBeLessThan(2500);
    });

    it('succeeds on the next send after a transient failure (node-apn does not retry by itself)', async () => {
      const apns = provider();
      const token = apnsToken();
      fake.respond(token, { status: 500, reason: 'InternalServerError' }, { status: 503, reason: 'Shutdown' });

      expect(failure((await send(apns, [token]))[0])).toMatchObject({ code: 'unavailable' });
      expect(fake.requestsFor(token)).toHaveLength(1);
      expect(failure((await send(apns, [token]))[0])).toMatchObject({ code: 'unavailable', message: 'APNs 503 Shutdown' });
      const [third] = await send(apns, [token]);
      expect(third).toEqual({ ok: true, providerMessageId: fake.requestsFor(token)[2].responseApnsId });
      expect(fake.requestsFor(token).map((seen) => seen.status)).toEqual([500, 503, 200]);
    });

    it('answers auth when the provider token is signed with another key, or names another team', async () => {
      const token = apnsToken();
      const [wrongKey] = await send(provider({ key: otherKey() }), [token]);
      expect(failure(wrongKey)).toEqual({ class: 'auth', code: 'auth', message: 'APNs 403 InvalidProviderToken' });
      const [wrongTeam] = await send(provider({ teamId: 'NOTMYTEAM1' }), [token]);
      expect(failure(wrongTeam)).toMatchObject({ code: 'auth', message: 'APNs 403 InvalidProviderToken' });
      expect(fake.requests.map((seen) => seen.status)).toEqual([403, 403]);
    });

    it('treats ExpiredProviderToken as transient, and the next send carries a new provider token', async () => {
      const apns = provider();
      const token = apnsToken();
      fake.respond(token, { status: 403, reason: 'ExpiredProviderToken' });

      const [first] = await send(apns, [token]);
      expect(failure(first)).toMatchObject({ class: 'transient', code: 'unavailable', message: expect.stringContaining('ExpiredProviderToken') });
      const [second] = await send(apns, [token]);
      expect(second.ok).toBe(true);
      const [expired, renewed] = fake.requestsFor(token);
      expect(renewed.authorization).toBeDefined();
      expect(renewed.authorization).not.toBe(expired.authorization);
    });

    it('answers payload-too-large when APNs refuses the size (413)', async () => {
      const apns = provider();
      const tokens = [apnsToken(), apnsToken()];
      const results = await send(apns, tokens, { body: 'x'.repeat(4096) });
      expect(fake.requests.every((seen) => seen.status === 413 && seen.bodyBytes > 4096)).toBe(true);
      expect(results.map(failure)).toEqual(tokens.map(() => ({ class: 'payload', code: 'payload-too-large', message: 'APNs 413 PayloadTooLarge' })));
    });

    it('sends once per distinct token, answers every target, and refuses a non-hex token without sending', async () => {
      const apns = provider();
      const token = apnsToken();
      const results = await send(apns, [token, 'not a token/../x', token]);
      expect(fake.requests).toHaveLength(1);
      expect(results[0]).toEqual({ ok: true, providerMessageId: fake.requests[0].responseApnsId });
      expect(results[2]).toEqual(results[0]);
      expect(failure(results[1])).toMatchObject({ class: 'dead-token', code: 'invalid-token' });
      expect(await apns.send({ pushId: randomUUID(), request: request() }, [])).toEqual([]);
      expect(fake.requests).toHaveLength(1);
    });
  });

  describe('connection', () => {
    it('reuses one HTTP/2 connection across sends, and reconnects after it drops', async () => {
      const apns = provider();
      await send(apns, [apnsToken()]);
      await send(apns, [apnsToken(), apnsToken(), apnsToken()]);
      await send(apns, [apnsToken()]);
      expect(fake.requests).toHaveLength(5);
      expect(fake.sessions).toBe(1);
      expect(new Set(fake.requests.map((seen) => seen.session))).toEqual(new Set([1]));

      await fake.disconnect();
      await sleep(50);
      const [result] = await send(apns, [apnsToken()]);
      expect(result.ok).toBe(true);
      expect(fake.sessions).toBe(2);
    });

    it('answers network for every target when the server is gone, and sends again once it is back', async () => {
      const apns = provider();
      expect((await send(apns, [apnsToken()]))[0].ok).toBe(true);
      await fake.close();

      const results = await send(apns, [apnsToken(), apnsToken()]);
      expect(results.map(failure)).toEqual([
        expect.objectContaining({ class: 'transient', code: 'network' }),
        expect.objectContaining({ class: 'transient', code: 'network' }),
      ]);

      await fake.restart();
      expect((await send(apns, [apnsToken()]))[0].ok).toBe(true);
    });

    it('answers network when nothing listens, and still closes', async () => {
      const port = fake.port;
      await fake.close();
      const apns = createApnsProvider(options({ port }));
      const [result] = await send(apns, [apnsToken()]);
      expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringMatching(/^APNs: /) });
      await apns.close();
      await fake.restart();
    });

    it('does not trust the fake without its CA (certificates are verified)', async () => {
      const apns = provider({ ca: undefined });
      const [result] = await send(apns, [apnsToken()]);
      expect(failure(result)).toMatchObject({ code: 'network' });
      expect(fake.requests).toHaveLength(0);
    });

    it('close() ends the connection; the provider refuses to send afterwards, and closing twice is fine', async () => {
      const apns = createApnsProvider(options());
      expect((await send(apns, [apnsToken()]))[0].ok).toBe(true);
      expect(fake.openSessions).toBe(1);
      await apns.close();
      await eventually(() => fake.openSessions === 0);
      await apns.close();
      await expect(send(apns, [apnsToken()])).rejects.toThrow(/closed/);
    });
  });
});

describe('apnsError: APNs answers in the taxonomy', () => {
  it.each([
    [410, 'Unregistered', 'unregistered'],
    [410, 'ExpiredToken', 'unregistered'],
    [400, 'BadDeviceToken', 'invalid-token'],
    [400, 'DeviceTokenNotForTopic', 'invalid-token'],
    [429, 'TooManyRequests', 'rate-limited'],
    [429, 'TooManyProviderTokenUpdates', 'rate-limited'],
    [500, 'InternalServerError', 'unavailable'],
    [503, 'ServiceUnavailable', 'unavailable'],
    [503, 'Shutdown', 'unavailable'],
    [403, 'ExpiredProviderToken', 'unavailable'],
    [400, 'IdleTimeout', 'unavailable'],
    [403, 'InvalidProviderToken', 'auth'],
    [403, 'MissingProviderToken', 'auth'],
    [403, 'BadCertificate', 'auth'],
    [403, 'BadCertificateEnvironment', 'auth'],
    [403, 'BadEnvironmentKeyInToken', 'auth'],
    [400, 'TopicDisallowed', 'auth'],
    [400, 'BadTopic', 'auth'],
    [400, 'MissingTopic', 'auth'],
    [413, 'PayloadTooLarge', 'payload-too-large'],
    [400, 'BadExpirationDate', 'payload-invalid'],
    [400, 'BadPriority', 'payload-invalid'],
    [400, 'BadMessageId', 'payload-invalid'],
    [400, 'BadCollapseId', 'payload-invalid'],
    [400, 'PayloadEmpty', 'payload-invalid'],
    [400, 'InvalidPushType', 'payload-invalid'],
    [404, 'BadPath', 'payload-invalid'],
    [405, 'MethodNotAllowed', 'payload-invalid'],
    [502, undefined, 'unavailable'],
    [429, undefined, 'rate-limited'],
  ] as const)('%s %s is %s', (status, reason, code) => {
    expect(apnsError(status, reason).code).toBe(code);
  });

  it.each([
    [429, 'TooManyRequests', 'device'],
    [429, undefined, 'device'],
    [429, 'TooManyProviderTokenUpdates', 'credential'],
  ] as const)('%s %s waits for the %s only', (status, reason, scope) => {
    expect(apnsError(status, reason, undefined, '3')).toEqual({ class: 'transient', code: 'rate-limited', message: expect.stringContaining('APNs 429'), retryAfterMs: 3000, scope });
  });

  it('is a network error without a status, and reads Retry-After on transient answers', () => {
    expect(apnsError(undefined, undefined, 'connect ECONNREFUSED')).toEqual({ class: 'transient', code: 'network', message: 'APNs: connect ECONNREFUSED' });
    expect(apnsError(429, 'TooManyRequests', undefined, '2').retryAfterMs).toBe(2000);
    expect(apnsError(503, 'ServiceUnavailable', undefined, '1.5').retryAfterMs).toBe(1500);
    expect(apnsError(410, 'Unregistered', undefined, '2')).not.toHaveProperty('retryAfterMs');
  });
});
