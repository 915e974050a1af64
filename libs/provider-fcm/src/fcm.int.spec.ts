import { randomUUID } from 'node:crypto';
import type { PushRequest } from '@operator/contract';
import { FakeFcm, fcmAnswer, fcmToken, pushRequest, until } from '@operator/testing';
import { createProviderRegistry, type Notification, type PushProvider, type SendResult, type SendTarget } from '@operator/providers';
import { createFcmProvider, type FcmProviderOptions } from './index';

// FCM over HTTP/2 and real TLS sockets, to a local FCM HTTP v1 API that checks the OAuth2 grant
// (RS256 assertion signed with the service account key) and the Bearer token of every send: what
// the fake received is what Google would receive.

function target(token = fcmToken(), platform: SendTarget['platform'] = 'android'): SendTarget {
  return { deliveryId: randomUUID(), token, platform, p256dh: null, auth: null };
}

function notification(overrides: Partial<PushRequest> = {}): Notification {
  return { pushId: randomUUID(), request: pushRequest(4242, 'player-7', overrides) };
}

const failure = (result: SendResult) => (result.ok ? null : result.error);

describe('FCM provider against a local FCM over TLS', () => {
  let fake: FakeFcm;
  let provider: PushProvider;
  const extra: { provider: PushProvider; fake?: FakeFcm }[] = [];

  const providerFor = (server: FakeFcm, options: Partial<FcmProviderOptions> = {}) => {
    const created = createFcmProvider({ serviceAccount: server.serviceAccount, httpAgent: server.agent, ...options });
    extra.push({ provider: created });
    return created;
  };

  beforeAll(async () => {
    fake = await FakeFcm.start();
    provider = createFcmProvider({ serviceAccount: fake.serviceAccount, httpAgent: fake.agent });
  });

  afterEach(async () => {
    await Promise.all(extra.splice(0).map(({ provider: created }) => created.close()));
  });

  afterAll(async () => {
    await provider.close();
    await fake.close();
  });

  it('puts every contract field where FCM v1 expects it, under the wire names', async () => {
    const push = notification({
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.test/promo/spins.png',
      android: {
        priority: 'high',
        ttl: '3600',
        collapse_key: 'weekend',
        restricted_package_name: 'com.example.casino',
        icon: 'ic_promo',
        color_rgb: 'FF0000',
        sound: 'coins.wav',
        tag: 'promo',
        click_action: 'OPEN_PROMO',
        body_loc_key: 'promo_body',
        body_loc_arcs: ['50', 'spins'],
        title_loc_keys: 'promo_title',
        title_loc_args: ['Weekend'],
        channel_id: 'promotions',
      },
      ios: { badge: '3', category: 'PROMO', thread_id: 'weekend', sub_title: 'Only today', loc_key: 'promo_body', loc_args: ['50'] },
      web: {
        icon: 'https://cdn.example.test/icon.png',
        badge: 'https://cdn.example.test/badge.png',
        dir: 'ltr',
        lang: 'en',
        renotify: 'true',
        require_interaction: 'yes',
        silent: 'false',
        tag: 'promo',
        timestamp: 1_700_000_000,
        vibrate: ['200', '100'],
        link: 'https://casino.example.test/promo',
      },
    });
    const token = fcmToken();
    const [result] = await provider.send(push, [target(token)]);
    expect(result).toEqual({ ok: true, providerMessageId: expect.stringMatching(new RegExp(`^projects/${fake.projectId}/messages/`)) });

    const [sent] = fake.sendsTo(token);
    expect(sent.authorization).toMatch(/^Bearer ya29\.fake-/);
    expect(sent.host).toBe('fcm.googleapis.com');
    const message = sent.message;
    expect(message.token).toBe(token);
    expect(message.data).toEqual({ push_id: push.pushId });
    expect(message.notification).toEqual({ title: 'Weekend reload', body: 'Your 50 free spins are waiting', image: 'https://cdn.example.test/promo/spins.png' });

    expect(message.android).toEqual({
      priority: 'high',
      ttl: '3600s',
      collapse_key: 'weekend',
      restricted_package_name: 'com.example.casino',
      notification: {
        icon: 'ic_promo',
        color: '#ff0000',
        sound: 'coins.wav',
        tag: 'promo',
        click_action: 'OPEN_PROMO',
        body_loc_key: 'promo_body',
        body_loc_args: ['50', 'spins'],
        title_loc_key: 'promo_title',
        title_loc_args: ['Weekend'],
        channel_id: 'promotions',
        image: 'https://cdn.example.test/promo/spins.png',
      },
    });

    expect(message.apns).toEqual({
      payload: {
        aps: {
          alert: { title: 'Weekend reload', body: 'Your 50 free spins are waiting', subtitle: 'Only today', 'loc-key': 'promo_body', 'loc-args': ['50'] },
          badge: 3,
          category: 'PROMO',
          'thread-id': 'weekend',
          'mutable-content': 1,
        },
        push_id: push.pushId,
        image_url: 'https://cdn.example.test/promo/spins.png',
      },
      fcm_options: { image: 'https://cdn.example.test/promo/spins.png' },
    });

    expect(message.webpush).toEqual({
      notification: {
        title: 'Weekend reload',
        body: 'Your 50 free spins are waiting',
        icon: 'https://cdn.example.test/icon.png',
        badge: 'https://cdn.example.test/badge.png',
        image: 'https://cdn.example.test/promo/spins.png',
        dir: 'ltr',
        lang: 'en',
        renotify: true,
        requireInteraction: true,
        silent: false,
        tag: 'promo',
        timestamp: 1_700_000_000_000,
        vibrate: [200, 100],
        data: { push_id: push.pushId, link: 'https://casino.example.test/promo' },
      },
      data: { push_id: push.pushId },
      fcm_options: { link: 'https://casino.example.test/promo' },
    });
    // These two go under their JSON names (firebase-admin's spelling); FCM (proto3 JSON) reads both.
    expect(sent.raw.webpush.fcmOptions).toEqual({ link: 'https://casino.example.test/promo' });
    expect(sent.raw.apns.fcmOptions).toEqual({ image: 'https://cdn.example.test/promo/spins.png' });
  });

  it('leaves out what FCM would refuse or could not use, and still delivers', async () => {
    const push = notification({
      image_url: 'not a url',
      android: { priority: 'urgent', ttl: 'soon', color_rgb: 'red', body_loc_arcs: ['orphan'], title_loc_args: ['orphan'], channel_id: 'promotions' },
      web: { link: 'http://casino.example.test/promo', renotify: 'maybe' },
    });
    const token = fcmToken();
    const [result] = await provider.send(push, [target(token)]);
    expect(result.ok).toBe(true);
    const { message } = fake.sendsTo(token)[0];
    expect(message.notification).toEqual({ title: push.request.title, body: push.request.body });
    expect(message.android).toEqual({ notification: { channel_id: 'promotions' } });
    expect(message.apns.fcm_options).toBeUndefined();
    expect(message.webpush.fcm_options).toBeUndefined();
    expect(message.webpush.notification).not.toHaveProperty('renotify');
    expect(message.data).toEqual({ push_id: push.pushId });
    expect(message.webpush.data).toEqual({ push_id: push.pushId });
    expect(message.apns.payload.push_id).toBe(push.pushId);
  });

  it('sends TTLs as FCM durations: "2h" as 7200s, "#00ff00" kept, more than 4 weeks capped', async () => {
    const [short, long] = [fcmToken(), fcmToken()];
    await provider.send(notification({ android: { ttl: '2h', color_rgb: '#00FF00', priority: 'Normal' } }), [target(short)]);
    await provider.send(notification({ android: { ttl: '90d' } }), [target(long)]);
    expect(fake.sendsTo(short)[0].message.android).toEqual({ ttl: '7200s', priority: 'normal', notification: { color: '#00ff00' } });
    expect(fake.sendsTo(long)[0].message.android.ttl).toBe(`${28 * 24 * 3600}s`);
  });

  it('answers one result per device, in order, for a mixed send', async () => {
    const tokens = { ok: fcmToken(), gone: fcmToken(), malformed: fcmToken(), busy: fcmToken(), broken: fcmToken() };
    fake.respond(tokens.gone, fcmAnswer.unregistered());
    fake.respond(tokens.malformed, fcmAnswer.invalidToken());
    fake.respond(tokens.busy, fcmAnswer.quotaExceeded(7));
    fake.respond(tokens.broken, fcmAnswer.internal());
    const push = notification();
    const results = await provider.send(push, Object.values(tokens).map((token) => target(token)));

    expect(results).toHaveLength(5);
    expect(results[0]).toEqual({ ok: true, providerMessageId: expect.stringMatching(/^projects\/.+\/messages\/.+/) });
    expect(failure(results[1])).toMatchObject({ class: 'dead-token', code: 'unregistered', message: expect.stringContaining('UNREGISTERED') });
    expect(failure(results[2])).toMatchObject({ class: 'dead-token', code: 'invalid-token', message: expect.stringContaining('not a valid FCM registration token') });
    expect(failure(results[3])).toEqual({ class: 'transient', code: 'rate-limited', message: expect.stringContaining('429'), retryAfterMs: 7000, scope: 'device' });
    expect(failure(results[4])).toMatchObject({ class: 'transient', code: 'unavailable', message: expect.stringContaining('500') });
    // 500 and 429 are not retried by the provider: one request each.
    expect(fake.sendsTo(tokens.broken)).toHaveLength(1);
    expect(fake.sendsTo(tokens.busy)).toHaveLength(1);
    for (const token of Object.values(tokens)) expect(fake.sendsTo(token)[0].message.data).toEqual({ push_id: push.pushId });
  });

  it("tells a project over its send quota, the credential's, from one device over its message rate", async () => {
    const [project, device, bare] = [fcmToken(), fcmToken(), fcmToken()];
    fake.respond(project, fcmAnswer.projectQuotaExceeded('123', 60));
    fake.respond(device, fcmAnswer.deviceMessageRateExceeded(5));
    fake.respond(bare, fcmAnswer.quotaExceeded());
    const results = await provider.send(notification(), [target(project), target(device), target(bare)]);
    expect(results.map(failure)).toEqual([
      { class: 'transient', code: 'rate-limited', message: expect.stringContaining("for consumer 'project_number:123'"), retryAfterMs: 60_000, scope: 'credential' },
      { class: 'transient', code: 'rate-limited', message: expect.stringContaining('Device message rate exceeded'), retryAfterMs: 5000, scope: 'device' },
      // Says neither whose quota nor which: taken as the device's (see quotaScope in provider.ts).
      { class: 'transient', code: 'rate-limited', message: expect.stringContaining('QUOTA_EXCEEDED'), scope: 'device' },
    ]);
  });

  it('a 500 is a result; sent again, the device gets it', async () => {
    const token = fcmToken();
    fake.respond(token, fcmAnswer.internal(), fcmAnswer.ok());
    const push = notification();
    const [first] = await provider.send(push, [target(token)]);
    expect(failure(first)).toMatchObject({ class: 'transient', code: 'unavailable' });
    const [second] = await provider.send(push, [target(token)]);
    expect(second).toEqual({ ok: true, providerMessageId: expect.any(String) });
    expect(fake.sendsTo(token).map((sent) => sent.status)).toEqual([500, 200]);
  });

  it('a 503 is retried once at once; one asking for 30 s comes back at once with retryAfterMs', async () => {
    const [flaky, down] = [fcmToken(), fcmToken()];
    fake.respond(flaky, fcmAnswer.unavailable(), fcmAnswer.ok());
    fake.respond(down, fcmAnswer.unavailable(30));
    const started = Date.now();
    const [recovered, refused] = await provider.send(notification(), [target(flaky), target(down)]);
    expect(recovered.ok).toBe(true);
    expect(fake.sendsTo(flaky).map((sent) => sent.status)).toEqual([503, 200]);
    expect(failure(refused)).toMatchObject({ class: 'transient', code: 'unavailable', retryAfterMs: 30_000 });
    expect(fake.sendsTo(down)).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('with sdkRetry false, even one 503 is a result', async () => {
    const token = fcmToken();
    fake.respond(token, fcmAnswer.unavailable(), fcmAnswer.ok());
    const [result] = await providerFor(fake, { sdkRetry: false }).send(notification(), [target(token)]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'unavailable' });
    expect(fake.sendsTo(token)).toHaveLength(1);
  });

  it('classes refusals of the message itself as payload errors', async () => {
    const [bad, big, ours] = [fcmToken(), fcmToken(), fcmToken()];
    fake.respond(bad, fcmAnswer.invalidArgument("Invalid value at 'message.android.notification.tag'", 'message.android.notification.tag'));
    fake.respond(big, fcmAnswer.invalidArgument('Message is too big', 'message'));
    const results = await provider.send(notification(), [target(bad), target(big), target(ours)]);
    expect(failure(results[0])).toMatchObject({ class: 'payload', code: 'payload-invalid', message: expect.stringContaining('message.android.notification.tag') });
    expect(failure(results[1])).toMatchObject({ class: 'payload', code: 'payload-too-large' });
    expect(results[2].ok).toBe(true);
  });

  it('classes project-level credential problems as auth', async () => {
    const [apns, mismatch] = [fcmToken(), fcmToken()];
    fake.respond(apns, fcmAnswer.thirdPartyAuth());
    fake.respond(mismatch, fcmAnswer.senderIdMismatch());
    const results = await provider.send(notification(), [target(apns, 'ios'), target(mismatch)]);
    expect(failure(results[0])).toMatchObject({ class: 'auth', code: 'auth', message: expect.stringContaining('third-party-auth-error') });
    expect(failure(results[1])).toMatchObject({ class: 'auth', code: 'auth', message: expect.stringContaining('mismatched-credential') });
  });

  it('an empty token is a dead token and never reaches FCM', async () => {
    const before = fake.requests.length;
    const [result] = await provider.send(notification(), [target('  ')]);
    expect(failure(result)).toMatchObject({ class: 'dead-token', code: 'invalid-token' });
    expect(fake.requests.length).toBe(before);
  });

  it('sends at most `concurrency` at once and keeps results in target order', async () => {
    const tokens = Array.from({ length: 5 }, () => fcmToken());
    fake.respond(tokens[1], fcmAnswer.unregistered());
    fake.respond(tokens[4], fcmAnswer.quotaExceeded(2));
    const results = await providerFor(fake, { concurrency: 2 }).send(notification(), tokens.map((token) => target(token)));
    expect(results.map((result) => (result.ok ? 'ok' : result.error.code))).toEqual(['ok', 'unregistered', 'ok', 'ok', 'rate-limited']);
    const ids = results.filter((result) => result.ok).map((result) => (result.ok ? result.providerMessageId : null));
    expect(new Set(ids).size).toBe(3);
  });

  it('a refused OAuth grant is an auth error for every device, and sending works again once fixed', async () => {
    const server = await FakeFcm.start();
    try {
      server.refuseGrants('Invalid grant: account not found');
      const own = providerFor(server);
      const results = await own.send(notification(), [target(), target()]);
      for (const result of results) {
        expect(failure(result)).toMatchObject({ class: 'auth', code: 'auth', message: expect.stringContaining('invalid_grant') });
      }
      expect(server.requests).toHaveLength(0);
      expect(server.tokenGrants.every((grant) => grant.status === 400)).toBe(true);

      server.refuseGrants(null);
      const [again] = await own.send(notification(), [target()]);
      expect(again.ok).toBe(true);
    } finally {
      await server.close();
    }
  });

  it("a token endpoint answering 429 is the credential's rate limit, for every device; sending works once it grants again", async () => {
    const server = await FakeFcm.start();
    try {
      server.throttleGrants(30);
      const own = providerFor(server);
      const results = await own.send(notification(), [target(), target()]);
      for (const result of results) {
        expect(failure(result)).toMatchObject({ class: 'transient', code: 'rate-limited', message: expect.stringContaining('429'), retryAfterMs: 30_000, scope: 'credential' });
      }
      expect(server.requests).toHaveLength(0);
      expect(server.tokenGrants.map((grant) => grant.status)).toEqual([429]);

      server.throttleGrants(null);
      expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
    } finally {
      await server.close();
    }
  });

  it('an access token FCM no longer accepts (401) is an auth error', async () => {
    const server = await FakeFcm.start();
    try {
      const own = providerFor(server);
      expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
      server.revokeAccessTokens();
      const [result] = await own.send(notification(), [target()]);
      expect(failure(result)).toMatchObject({ class: 'auth', code: 'auth' });
    } finally {
      await server.close();
    }
  });

  it('FCM down is a network error, with or without a cached access token', async () => {
    const server = await FakeFcm.start();
    const warm = providerFor(server);
    expect((await warm.send(notification(), [target()]))[0].ok).toBe(true);
    await server.close();

    const started = Date.now();
    const [cached] = await warm.send(notification(), [target()]);
    expect(failure(cached)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('ECONNREFUSED') });
    // No token yet: the token request itself fails; that is the network, not our credentials.
    const [cold] = await providerFor(server).send(notification(), [target()]);
    expect(failure(cold)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('ECONNREFUSED') });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a connection cut before the answer is retried once, then a network error', async () => {
    const token = fcmToken();
    fake.respond(token, fcmAnswer.hangUp());
    const [result] = await provider.send(notification(), [target(token)]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network' });
    expect(fake.sendsTo(token)).toHaveLength(2);
  });

  it('reuses its client: one OAuth grant and kept-alive connections across sends', async () => {
    const server = await FakeFcm.start();
    try {
      const own = providerFor(server);
      for (let round = 0; round < 3; round += 1) {
        const results = await own.send(notification(), [target()]);
        expect(results[0].ok).toBe(true);
      }
      expect(server.tokenGrants).toHaveLength(1);
      expect(server.tokenGrants[0]).toMatchObject({
        status: 200,
        claims: { iss: server.serviceAccount.client_email, aud: 'https://oauth2.googleapis.com/token' },
      });
      const bearer = new Set(server.requests.map((sent) => sent.authorization));
      expect(bearer.size).toBe(1);
      // One connection to the token host, one to FCM: requests one after another share it.
      expect(server.connections).toBe(2);
    } finally {
      await server.close();
    }
  });

  it('close() closes its connections; a closed provider refuses to send', async () => {
    const server = await FakeFcm.start();
    try {
      const own = createFcmProvider({ serviceAccount: server.serviceAccount, httpAgent: server.agent });
      expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
      await own.close();
      await own.close();
      server.agent.destroy();
      await until(() => server.openConnections === 0, 'the connections to close');
      await expect(own.send(notification(), [target()])).rejects.toThrow(/closed/);
    } finally {
      await server.close();
    }
  });
});

describe('FCM clients of two brands in one registry', () => {
  let seven: FakeFcm;
  let eight: FakeFcm;

  beforeEach(async () => {
    [seven, eight] = await Promise.all([FakeFcm.start(), FakeFcm.start()]);
  });

  afterEach(async () => {
    await Promise.all([seven.close(), eight.close()]);
  });

  it("pauses only the client of the project over its quota, for the capped Retry-After; the other brand's sends go on", async () => {
    // Each brand has its own Firebase project (its own fake FCM) and so its own client.
    const registry = createProviderRegistry<FakeFcm>({
      name: 'fcm',
      brandCredentials: new Map([
        ['7', seven],
        ['8', eight],
      ]),
      create: (server) => createFcmProvider({ serviceAccount: server.serviceAccount, httpAgent: server.agent }),
      retryAfterMaxMs: 300,
    });
    try {
      const [busy, waiting, other] = [fcmToken(), fcmToken(), fcmToken()];
      seven.respond(busy, fcmAnswer.projectQuotaExceeded('7007', 3600));
      const [refused] = await registry.providerFor('7').send(notification(), [target(busy)]);
      expect(failure(refused)).toMatchObject({ code: 'rate-limited', retryAfterMs: 3_600_000, scope: 'credential' });

      // Brand 7 is answered without reaching FCM, told to wait no longer than the cap; brand 8 sends.
      const [held] = await registry.providerFor('7').send(notification(), [target(waiting)]);
      expect(failure(held)).toMatchObject({ code: 'rate-limited', message: expect.stringContaining('paused over its quota'), scope: 'credential' });
      expect(failure(held)!.retryAfterMs).toBeLessThanOrEqual(300);
      expect(seven.sendsTo(waiting)).toHaveLength(0);
      expect((await registry.providerFor('8').send(notification(), [target(other)]))[0].ok).toBe(true);
      expect(eight.sendsTo(other)).toHaveLength(1);

      // Once the cap has passed, not the hour FCM asked for, brand 7 sends again.
      await until(async () => (await registry.providerFor('7').send(notification(), [target(waiting)]))[0].ok, 'brand 7 to send again');
      expect(seven.sendsTo(waiting).map((sent) => sent.status)).toEqual([200]);
    } finally {
      await registry.close();
    }
  });
});

describe('FCM provider over HTTP/2', () => {
  let fake: FakeFcm;
  const providers: PushProvider[] = [];

  const providerFor = (server: FakeFcm, options: Partial<FcmProviderOptions> = {}) => {
    const created = createFcmProvider({ serviceAccount: server.serviceAccount, httpAgent: server.agent, ...options });
    providers.push(created);
    return created;
  };

  beforeEach(async () => {
    fake = await FakeFcm.start();
  });

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((provider) => provider.close()));
    await fake.close();
  });

  it('sends over HTTP/2, the token grant over HTTP/1.1', async () => {
    const token = fcmToken();
    const [result] = await providerFor(fake).send(notification(), [target(token)]);
    expect(result.ok).toBe(true);
    expect(fake.sendsTo(token).map((sent) => [sent.httpVersion, sent.host])).toEqual([['2.0', 'fcm.googleapis.com']]);
    expect(fake.tokenGrants).toHaveLength(1);
  });

  it('carries 300 concurrent sends on one connection, with one token grant', async () => {
    const tokens = Array.from({ length: 300 }, () => fcmToken());
    const results = await providerFor(fake).send(notification(), tokens.map((token) => target(token)));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.requests).toHaveLength(300);
    expect(new Set(fake.requests.map((sent) => sent.connection)).size).toBe(1);
    expect(fake.sessions).toBe(1);
    // That session and the token grant's HTTP/1.1 connection.
    expect(fake.connections).toBe(2);
    expect(fake.tokenGrants).toHaveLength(1);
  });

  it('sends past the server limit of concurrent streams without failing', async () => {
    const server = await FakeFcm.start({ maxConcurrentStreams: 10 });
    try {
      const own = providerFor(server);
      const tokens = Array.from({ length: 300 }, () => fcmToken());
      for (const token of tokens.slice(0, 30)) server.respond(token, { status: 200, delayMs: 50 });
      const results = await own.send(notification(), tokens.map((token) => target(token)));
      expect(results.filter((result) => !result.ok)).toEqual([]);
      expect(server.delivered).toHaveLength(300);
      // Once the limit is known, further connections take the overflow (up to a few).
      const again = await own.send(notification(), tokens.map((token) => target(token)));
      expect(again.every((result) => result.ok)).toBe(true);
      expect(server.sessions).toBeLessThanOrEqual(8);
    } finally {
      await server.close();
    }
  });

  it('a connection cut mid-flight gives network errors at once, and the next send reconnects', async () => {
    const own = providerFor(fake, { sdkRetry: false });
    expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
    const tokens = Array.from({ length: 20 }, () => fcmToken());
    for (const token of tokens) fake.respond(token, { status: 200, delayMs: 1000 });
    const started = Date.now();
    const sending = own.send(notification(), tokens.map((token) => target(token)));
    await until(() => fake.requests.length === 21, 'the sends to arrive');
    fake.cutConnections();
    const results = await sending;
    expect(Date.now() - started).toBeLessThan(900);
    for (const result of results) expect(failure(result)).toMatchObject({ class: 'transient', code: 'network' });

    const [next] = await own.send(notification(), [target()]);
    expect(next.ok).toBe(true);
    expect(fake.sessions).toBe(2);
  });

  it('a send whose connection is cut before the answer is sent again on a new connection', async () => {
    const own = providerFor(fake);
    const token = fcmToken();
    fake.respond(token, { status: 200, delayMs: 300 });
    const sending = own.send(notification(), [target(token)]);
    await until(() => fake.sendsTo(token).length === 1, 'the send to arrive');
    fake.cutConnections();
    const [result] = await sending;
    expect(result.ok).toBe(true);
    const sends = fake.sendsTo(token);
    expect(sends).toHaveLength(2);
    expect(sends[0].connection).not.toBe(sends[1].connection);
  });

  it('a send not answered in time is cancelled as a network error', async () => {
    const own = providerFor(fake, { timeoutMs: 300 });
    const token = fcmToken();
    fake.respond(token, { status: 200, delayMs: 2000 });
    const started = Date.now();
    const [result] = await own.send(notification(), [target(token)]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('300 ms') });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(fake.sendsTo(token)).toHaveLength(1);
  });
});
