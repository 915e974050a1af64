import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, type PushWorkerConfig } from '@operator/config';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import type { ProviderName } from '@operator/contract';
import { createApnsProvider } from '@operator/provider-apns';
import { createFcmProvider } from '@operator/provider-fcm';
import { createHmsProvider } from '@operator/provider-hms';
import { createOneSignalProvider } from '@operator/provider-onesignal';
import { createWebPushProvider } from '@operator/provider-webpush';
import type { PushProvider } from '@operator/providers';
import { startPushWorker, type PushWorker } from '@operator/push';
import {
  apnsToken,
  FakeApns,
  FakeFcm,
  FakeHms,
  FakeOneSignal,
  FakePushService,
  fcmToken,
  hmsToken,
  OPERATOR_KEY,
  oneSignalSubscriptionId,
  pushRequest,
  testTls,
  uniqueBrandId,
  uniqueName,
  until,
  vapidKeys,
} from '@operator/testing';
import { Harness } from './test/harness';

// One player with a device at each of the five providers, every worker running against a local
// server that speaks its provider's protocol: one push from the CRM reaches all five, each with the
// contract's fields where the mapping table of docs/contract-mapping.md puts them, and the CRM's feed carries one
// event per status, each with the push's meta.

interface FeedEvent {
  event_id: string;
  push_id: string;
  status: string;
  meta: unknown;
}

describe('one push to a player with an FCM, an APNs, a Web Push, an HMS and a OneSignal device', () => {
  const vapid = { ...vapidKeys(), subject: 'mailto:ops@example.test' };
  const log = createLogger('five-providers', 'silent');
  let h: Harness;
  let fcm: FakeFcm;
  let apns: FakeApns;
  let webpush: FakePushService;
  let hms: FakeHms;
  let onesignal: FakeOneSignal;
  const workers: PushWorker[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'five-providers-'));
  /** A credential file, as an operator mounts it. */
  const credentialFile = (name: string, content: string) => {
    writeFileSync(join(dir, name), content);
    return join(dir, name);
  };

  /** Starts a provider's worker on the gateway's stores, with `env` as its credentials and `client` as its provider client. */
  async function startWorker(
    provider: ProviderName,
    env: Record<string, string>,
    client: (credential: any, config: PushWorkerConfig) => PushProvider,
  ) {
    const config = loadPushWorkerConfig(provider, {
      ...process.env,
      QUEUE_PREFIX: h.stores.config.QUEUE_PREFIX,
      METRICS_PORT: '0',
      PUSH_SEND_BACKOFF_MS: '100',
      ...env,
    });
    expect(config.sandbox).toBe(false);
    workers.push(await startPushWorker(provider, config, log, (credential) => client(credential, config)));
  }

  beforeAll(async () => {
    [fcm, apns, webpush, hms, onesignal] = await Promise.all([
      FakeFcm.start(),
      FakeApns.start(),
      FakePushService.start({ vapidPublicKey: vapid.publicKey }),
      FakeHms.start(),
      FakeOneSignal.start(),
    ]);
    h = await Harness.open({ WEBPUSH_ALLOWED_ORIGINS: webpush.origin });
    const ca = testTls().ca;
    await startWorker('fcm', { FCM_SERVICE_ACCOUNT_FILE: credentialFile('fcm.json', JSON.stringify(fcm.serviceAccount)) }, () => createFcmProvider({ serviceAccount: fcm.serviceAccount, httpAgent: fcm.agent }));
    const apnsEnv = { APNS_KEY_FILE: credentialFile('apns.p8', apns.key), APNS_KEY_ID: apns.keyId, APNS_TEAM_ID: apns.teamId, APNS_TOPIC: 'com.example.casino' };
    await startWorker('apns', apnsEnv, () =>
      createApnsProvider({ key: apns.key, keyId: apns.keyId, teamId: apns.teamId, topic: 'com.example.casino', production: false, host: apns.host, port: apns.port, ca }),
    );
    await startWorker('webpush', { VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey, VAPID_SUBJECT: vapid.subject, WEBPUSH_ALLOWED_ORIGINS: webpush.origin }, (credential, config) =>
      createWebPushProvider({ vapid: credential.vapid, allowedOrigins: config.webpushAllowedOrigins, ca }),
    );
    await startWorker('hms', { HMS_APP_ID: hms.appId, HMS_APP_SECRET: hms.appSecret, HMS_ENDPOINT: hms.origin }, ({ appId, appSecret, endpoint }) =>
      createHmsProvider({ appId, appSecret, endpoint, ca: hms.ca }),
    );
    await startWorker('onesignal', { ONESIGNAL_APP_ID: onesignal.appId, ONESIGNAL_REST_API_KEY: onesignal.restApiKey, ONESIGNAL_ENDPOINT: onesignal.origin }, ({ appId, restApiKey, endpoint }) =>
      createOneSignalProvider({ appId, restApiKey, endpoint, ca: onesignal.ca }),
    );
  }, 60000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.close()));
    await h?.close();
    await Promise.all([fcm, apns, webpush, hms, onesignal].map((fake) => fake?.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every event of the feed for this push, read as the CRM polls it. */
  async function eventsOf(pushId: string): Promise<FeedEvent[]> {
    const events: FeedEvent[] = [];
    let after = '0';
    for (;;) {
      const response = await h.app.inject({ method: 'GET', url: `/channels/push/events?after=${after}&limit=1000`, headers: { 'x-api-key': OPERATOR_KEY } });
      const page = response.json() as { events: FeedEvent[]; next_cursor: string };
      events.push(...page.events.filter((event) => event.push_id === pushId));
      if (page.events.length < 1000) return events;
      after = page.next_cursor;
    }
  }

  it('reaches all five with the mapped fields, and reports each status once with its meta', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('five-player');
    const tokens = { fcm: fcmToken(), apns: apnsToken(), hms: hmsToken(), onesignal: oneSignalSubscriptionId() };
    const subscriptionId = uniqueName('sub');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: tokens.fcm });
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'apns', platform: 'ios', token: tokens.apns });
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'webpush', platform: 'web', subscription: webpush.subscription(subscriptionId) });
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'hms', platform: 'android', token: tokens.hms });
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'onesignal', platform: 'ios', token: tokens.onesignal });

    const meta = { campaign: 'five-providers', variant: 3 };
    const request = pushRequest(brand, player, {
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.com/spins.png',
      meta,
      android: { priority: 'high', ttl: '1h', color_rgb: 'ff8800', channel_id: 'promotions', tag: 'reload' },
      ios: { sub_title: 'Only this weekend', badge: '3', thread_id: 'promos' },
      web: { icon: 'https://cdn.example.com/icon.png', link: 'https://casino.example.com/spins' },
    });
    const accepted = await h.single(request);
    expect(accepted.statusCode).toBe(200);
    const pushId: string = accepted.json().push_id;

    const received = () => ({
      fcm: fcm.requests.filter((send) => send.token === tokens.fcm && send.status === 200),
      apns: apns.requestsFor(tokens.apns).filter((send) => send.status === 200),
      webpush: webpush.receivedFor(subscriptionId),
      hms: hms.deliveriesTo(tokens.hms),
      onesignal: onesignal.deliveriesTo(tokens.onesignal),
    });
    await until(() => Object.values(received()).every((sends) => sends.length > 0), 'the push at all five providers', 30000);
    const got = received();
    // Once each.
    expect(Object.fromEntries(Object.entries(got).map(([provider, sends]) => [provider, sends.length]))).toEqual({ fcm: 1, apns: 1, webpush: 1, hms: 1, onesignal: 1 });

    // Each with the fields where docs/contract-mapping.md's table says.
    const fcmMessage = got.fcm[0].message;
    expect(fcmMessage).toMatchObject({
      notification: { title: request.title, body: request.body, image: request.image_url },
      android: { priority: 'high', ttl: '3600s', notification: { color: '#ff8800', channel_id: 'promotions', tag: 'reload' } },
      data: { push_id: pushId, tracking_token: expect.any(String) },
    });
    const apnsBody = got.apns[0].body as Record<string, any>;
    expect(apnsBody).toMatchObject({ aps: { alert: { title: request.title, body: request.body, subtitle: 'Only this weekend' }, badge: 3, 'thread-id': 'promos' }, push_id: pushId });
    expect(got.webpush[0].payload).toMatchObject({ title: request.title, options: { body: request.body, icon: 'https://cdn.example.com/icon.png', data: { push_id: pushId, link: 'https://casino.example.com/spins' } } });
    const hmsMessage = got.hms[0].message;
    expect(hmsMessage).toMatchObject({
      android: { urgency: 'HIGH', ttl: '3600s', notification: { title: request.title, body: request.body, image: request.image_url, color: '#FF8800', channel_id: 'promotions', tag: 'reload' } },
    });
    const hmsData = JSON.parse(hmsMessage.data);
    expect(hmsData).toEqual({ push_id: pushId, tracking_token: expect.any(String) });
    const oneSignalBody = got.onesignal[0].request.body;
    expect(oneSignalBody).toMatchObject({
      headings: { en: request.title },
      contents: { en: request.body },
      subtitle: { en: 'Only this weekend' },
      big_picture: request.image_url,
      priority: 10,
      ttl: 3600,
      ios_badgeType: 'SetTo',
      ios_badgeCount: 3,
      thread_id: 'promos',
      chrome_web_icon: 'https://cdn.example.com/icon.png',
      web_url: 'https://casino.example.com/spins',
      data: { push_id: pushId, tracking_token: hmsData.tracking_token },
    });

    // One `sent`, with its meta, once the first device's provider took it.
    await until(async () => (await eventsOf(pushId)).some((event) => event.status === 'sent'), 'the sent event in the feed', 20000);
    // The app on the HMS phone reports it delivered, the one on the OneSignal device opened: each once.
    const report = (type: string) =>
      h.app.inject({ method: 'POST', url: `/v1/push/${pushId}/events`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ type, token: hmsData.tracking_token }) });
    expect((await report('delivered')).json()).toMatchObject({ status: 'delivered', changed: true });
    expect((await report('opened')).json()).toMatchObject({ status: 'opened', changed: true });
    expect((await report('delivered')).json()).toMatchObject({ changed: false });
    // The feed answers an event once every transaction older than it has ended: wait for the last one.
    await until(async () => (await eventsOf(pushId)).some((event) => event.status === 'opened'), 'the opened event in the feed', 20000);
    const events = await eventsOf(pushId);
    expect(events.map((event) => event.status)).toEqual(['sent', 'delivered', 'opened']);
    expect(new Set(events.map((event) => event.event_id)).size).toBe(3);
    for (const event of events) expect(event.meta).toEqual(meta);
  }, 90000);

  it('deactivates the HMS and OneSignal devices their providers call invalid, and settles the push by the same rules', async () => {
    const brand = uniqueBrandId();
    const gone = uniqueName('gone-player');
    const mixed = uniqueName('mixed-player');
    const deadHms = hmsToken();
    const deadOneSignal = oneSignalSubscriptionId();
    hms.invalidTokens.add(deadHms);
    onesignal.invalidate(deadOneSignal);
    const fcmDevice = fcmToken();
    await h.registerDevice({ user_id: gone, brand_id: brand, provider: 'hms', platform: 'android', token: deadHms });
    await h.registerDevice({ user_id: gone, brand_id: brand, provider: 'onesignal', platform: 'ios', token: deadOneSignal });
    await h.registerDevice({ user_id: mixed, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmDevice });
    await h.registerDevice({ user_id: mixed, brand_id: brand, provider: 'hms', platform: 'android', token: hmsToken() });

    const allGone = (await h.single(pushRequest(brand, gone))).json().push_id as string;
    const oneGood = (await h.single(pushRequest(brand, mixed))).json().push_id as string;
    const status = async (pushId: string) => (await h.app.inject({ method: 'GET', url: `/channels/push/${pushId}`, headers: { 'x-api-key': OPERATOR_KEY } })).json();
    await until(async () => (await status(allGone)).status === 'failed' && (await status(oneGood)).status === 'sent', 'both pushes settled', 30000);

    // Every device of the first player was dead: the push failed, naming why; its devices are off.
    const failed = await status(allGone);
    expect(failed.error).toMatch(/invalid-token|unregistered/);
    expect(failed.deliveries.map((d: { provider: string; status: string }) => [d.provider, d.status]).sort()).toEqual([
      ['hms', 'failed'],
      ['onesignal', 'failed'],
    ]);
    const { devices } = (await h.internal('GET', `/v1/players/${gone}/devices`)).json() as { devices: { provider: string; active: boolean }[] };
    expect(devices.map((d) => [d.provider, d.active]).sort()).toEqual([
      ['hms', false],
      ['onesignal', false],
    ]);
    // The second player's push was sent to both its devices (it is `sent` at the first; the other may still be on its way).
    const bothSent = async () => (await status(oneGood)).deliveries.every((d: { status: string }) => d.status === 'sent');
    await until(bothSent, 'both devices of the second player sent', 30000);
    expect((await status(oneGood)).deliveries.map((d: { status: string }) => d.status)).toEqual(['sent', 'sent']);
    // The dead tokens were tried once, and are not sent to again.
    expect(hms.deliveriesTo(deadHms)).toEqual([]);
    expect(onesignal.deliveriesTo(deadOneSignal)).toEqual([]);
    const again = await h.single(pushRequest(brand, gone));
    expect(again.json()).toEqual({ error: expect.stringMatching(/no active device/), code: again.statusCode });
  }, 60000);
});
