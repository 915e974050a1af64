import { randomUUID } from 'node:crypto';
import type { FakeOneSignal } from '@operator/testing';
import { idempotencyKey } from './index';
import { failure, notification, oneSignalSuite, target } from './test/fixture';

// OneSignal's create-notification API over real TLS sockets, to a local server that checks the key,
// the app id and the body as OneSignal does, and records which subscription got which push.

describe('OneSignal provider against a local OneSignal API over TLS', () => {
  const suite = oneSignalSuite();
  const provider = suite.provider;
  let fake: FakeOneSignal;
  beforeAll(() => {
    fake = suite.fake();
  });

  it('sends a push to several subscriptions in one request, each delivered once with every mapped field', async () => {
    const push = notification({
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.test/promo/spins.png',
      android: { priority: 'high', ttl: '3600', collapse_key: 'weekend', icon: 'ic_promo', color_rgb: 'FF0000', sound: 'coins.wav', channel_id: 'promotions' },
      ios: { badge: '3', category: 'PROMO', thread_id: 'weekend', sub_title: 'Only today' },
      web: { icon: 'https://cdn.example.test/icon.png', badge: 'https://cdn.example.test/badge.png', link: 'https://casino.example.test/promo' },
    });
    const targets = [target(), target(undefined, 'ios'), target(undefined, 'web')];

    const results = await provider().send(push, targets);

    expect(fake.requests).toHaveLength(1);
    const [request] = fake.requests;
    expect(results).toEqual(targets.map(() => ({ ok: true, providerMessageId: request.notificationId })));
    expect(request.url).toBe('/notifications?c=push');
    expect(request.authorization).toBe(`Key ${fake.restApiKey}`);
    expect(request.unknownFields).toEqual([]);
    expect(request.body).toEqual({
      app_id: fake.appId,
      target_channel: 'push',
      // In the order of the delivery ids, as the batches are cut.
      include_subscription_ids: [...targets].sort((a, b) => (a.deliveryId < b.deliveryId ? -1 : 1)).map((t) => t.token),
      idempotency_key: idempotencyKey(push.pushId, targets.map((t) => t.deliveryId)),
      contents: { en: 'Your 50 free spins are waiting' },
      headings: { en: 'Weekend reload' },
      subtitle: { en: 'Only today' },
      data: { push_id: push.pushId, tracking_token: push.trackingToken },
      big_picture: 'https://cdn.example.test/promo/spins.png',
      ios_attachments: { image: 'https://cdn.example.test/promo/spins.png' },
      chrome_web_image: 'https://cdn.example.test/promo/spins.png',
      existing_android_channel_id: 'promotions',
      priority: 10,
      ttl: 3600,
      collapse_id: 'weekend',
      android_accent_color: 'FFFF0000',
      small_icon: 'ic_promo',
      android_sound: 'coins',
      chrome_web_icon: 'https://cdn.example.test/icon.png',
      chrome_web_badge: 'https://cdn.example.test/badge.png',
      web_url: 'https://casino.example.test/promo',
      ios_badgeType: 'SetTo',
      ios_badgeCount: 3,
      ios_category: 'PROMO',
      thread_id: 'weekend',
    });
    // The key goes in the Authorization header and nowhere else.
    expect(JSON.stringify(request.body)).not.toContain(fake.restApiKey);
    expect(fake.delivered.map((d) => [d.subscriptionId, d.pushId]).sort()).toEqual(targets.map((t) => [t.token, push.pushId]).sort());
    expect(fake.duplicates()).toBe(0);
  });

  it('answers one result per target, in order: the invalid subscriptions dead, the others sent', async () => {
    const targets = [target(), target(), target(), target()];
    fake.invalidate(targets[1].token, targets[3].token);

    const results = await provider().send(notification(), targets);

    const notificationId = fake.requests[0].notificationId;
    expect(results[0]).toEqual({ ok: true, providerMessageId: notificationId });
    expect(results[2]).toEqual({ ok: true, providerMessageId: notificationId });
    for (const index of [1, 3]) expect(failure(results[index])).toMatchObject({ class: 'dead-token', code: 'unregistered' });
    expect(fake.delivered.map((d) => d.subscriptionId).sort()).toEqual([targets[0].token, targets[2].token].sort());
  });

  it('takes "All included players are not subscribed" as every subscription dead', async () => {
    const targets = [target(), target()];
    fake.invalidate(...targets.map((t) => t.token));

    const results = await provider().send(notification(), targets);

    expect(fake.requests[0].reason).toBe('none subscribed');
    for (const result of results) expect(failure(result)).toMatchObject({ class: 'dead-token', code: 'unregistered', message: expect.stringContaining('not subscribed') });
    expect(fake.delivered).toEqual([]);
  });

  it('never sends a token that is no subscription id: OneSignal would refuse the whole request for it', async () => {
    const good = target();
    const results = await provider().send(notification(), [target('not-a-uuid'), good, target('')]);

    expect(failure(results[0])).toMatchObject({ class: 'dead-token', code: 'invalid-token' });
    expect(failure(results[2])).toMatchObject({ class: 'dead-token', code: 'invalid-token' });
    expect(results[1].ok).toBe(true);
    expect(fake.requests.map((r) => r.subscriptionIds)).toEqual([[good.token]]);
  });

  it('splits past the per-request maximum, each batch under a key of its own, each subscription delivered once', async () => {
    const push = notification();
    const targets = Array.from({ length: 5 }, () => target());

    const results = await provider({ maxSubscriptionsPerRequest: 2 }).send(push, targets);

    expect(fake.requests.map((r) => r.subscriptionIds.length).sort()).toEqual([1, 2, 2]);
    expect(new Set(fake.requests.map((r) => r.idempotencyKey)).size).toBe(3);
    const byId = new Map(fake.delivered.map((d) => [d.subscriptionId, d.notificationId]));
    expect(results).toEqual(targets.map((t) => ({ ok: true, providerMessageId: byId.get(t.token) })));
    expect(fake.delivered).toHaveLength(5);
    expect(fake.duplicates()).toBe(0);
  });

  it('sends a subscription named by two deliveries once, and gives both its result', async () => {
    const shared = randomUUID();
    const results = await provider().send(notification(), [target(shared), target(shared)]);

    expect(fake.requests[0].subscriptionIds).toEqual([shared]);
    expect(results[0]).toEqual(results[1]);
    expect(results[0].ok).toBe(true);
  });

  it('takes a key or app id OneSignal refuses as auth, and a body it refuses as a payload error', async () => {
    const [wrongKey] = await provider({ restApiKey: 'os_v2_app_not-ours' }).send(notification(), [target()]);
    expect(failure(wrongKey)).toMatchObject({ class: 'auth', code: 'auth', message: expect.stringContaining('HTTP 403') });

    const [wrongApp] = await provider({ appId: randomUUID() }).send(notification(), [target()]);
    expect(failure(wrongApp)).toMatchObject({ class: 'auth', code: 'auth' });

    // OneSignal needs English content; a push with an empty body has none.
    const [empty] = await provider().send(notification({ body: '' }), [target()]);
    expect(failure(empty)).toMatchObject({ class: 'payload', code: 'payload-invalid', message: expect.stringContaining('English language content') });
    expect(fake.delivered).toEqual([]);
  });

  it('speaks the legacy Basic scheme when told to', async () => {
    const [result] = await provider({ authorizationScheme: 'Basic' }).send(notification(), [target()]);
    expect(result.ok).toBe(true);
    expect(fake.requests[0].authorization).toBe(`Basic ${fake.restApiKey}`);
  });
});
