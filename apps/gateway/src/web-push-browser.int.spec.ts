import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';
import { createLogger } from '@operator/config';
import { createWebPushProvider } from '@operator/provider-webpush';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import { startPushWorker, type PushWorker } from '@operator/push';
import { createDb, closeDb, type Db } from '@operator/db';
import { createDispatcher, type Dispatcher } from '@operator/webhooks';
import type { PushRequest, Web } from '@operator/contract';
import { FakeCrm, FakePushService, pushRequest, testTls, uniqueBrandId, uniqueName, until, vapidKeys, type CrmRequest } from '@operator/testing';
import { Harness } from './test/harness';

// The player's side of Web Push in a real browser (Debian's Chromium, headless): the site's page
// subscribes with sdk/web/operator-push.js, its back end registers the subscription, the CRM sends
// a push, the project's Web Push worker encrypts it for the local push service, which decrypts it
// with the subscription's keys; the DevTools protocol hands it to sdk/web/operator-push-sw.js, which
// shows it and reports `delivered`; a click reports `clicked`; the CRM's status webhook gets both,
// with the push's meta as the CRM wrote it.

const ROOT = path.join(__dirname, '../../..');
const SDK = path.join(ROOT, 'sdk/web');
const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (candidate): candidate is string => !!candidate && existsSync(candidate),
);
if (!CHROMIUM) {
  process.stdout.write('web-push-browser: SKIPPED, no Chromium here (apt-get install -y chromium, or set CHROMIUM_PATH)\n');
}
const inBrowser = CHROMIUM ? describe : describe.skip;

/** The meta as the CRM writes it: spacing, 1.0, a number past 2^53 and an escape that JSON.stringify would change. */
const RAW_META = '{ "campaign" : "web-spins",  "n": 1.0, "big": 12345678901234567890, "u": "\\u00e9" }';
const SECRET = 'whsec-browser-test';

/** A notification as the browser holds it (registration.getNotifications()). */
interface Held {
  title: string;
  body: string;
  icon: string;
  badge: string;
  image: string;
  dir: string;
  lang: string;
  renotify: boolean;
  requireInteraction: boolean;
  silent: boolean | null;
  tag: string;
  timestamp: number;
  vibrate: number[];
  data: Record<string, unknown>;
}

inBrowser('the Web Push service worker in a real browser', () => {
  const vapid = { ...vapidKeys(), subject: 'mailto:ops@example.test' };
  const log = createLogger('web-push-browser', 'silent');
  const brand = uniqueBrandId();
  const player = uniqueName('web-player');
  let h: Harness;
  let api: string;
  let push: FakePushService;
  let crm: FakeCrm;
  let worker: PushWorker;
  let dispatcherDb: Db;
  let dispatcher: Dispatcher;
  let site: http.Server;
  let origin: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let cdp: CDPSession;
  let registrationId: string;
  const subscriptionId = uniqueName('browser-sub');
  /** What the page helper passed to PushManager.subscribe, and what the site's back end registered. */
  const subscribedWith: string[] = [];
  const registered: unknown[] = [];
  const mine = new Set<string>();

  beforeAll(async () => {
    [push, crm] = await Promise.all([FakePushService.start({ vapidPublicKey: vapid.publicKey }), FakeCrm.start()]);
    crm.reset().only((request) => mine.has(request.json?.push_id));
    h = await Harness.open({ WEBPUSH_ALLOWED_ORIGINS: push.origin, VAPID_PUBLIC_KEY: vapid.publicKey });
    api = await h.app.listen({ host: '127.0.0.1', port: 0 });

    const config = loadPushWorkerConfig('webpush', {
      ...process.env,
      QUEUE_PREFIX: h.stores.config.QUEUE_PREFIX,
      METRICS_PORT: '0',
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: vapid.subject,
      WEBPUSH_ALLOWED_ORIGINS: push.origin,
    });
    worker = await startPushWorker('webpush', config, log, (credential) =>
      createWebPushProvider({ vapid: credential.vapid, allowedOrigins: config.webpushAllowedOrigins, ca: testTls().ca }),
    );
    dispatcherDb = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
    dispatcher = createDispatcher({
      db: dispatcherDb,
      log: { info: () => undefined, warn: () => undefined, error: () => undefined },
      urls: { 'push.status': crm.url('/webhooks/push-status') },
      secret: SECRET,
      auth: {},
      timeoutMs: 2000,
      concurrency: 4,
      batchSize: 50,
      leaseMs: 5000,
      maxAgeMs: 3_600_000,
      backoffMs: 50,
      maxBackoffMs: 500,
      idleMs: 50,
    });
    dispatcher.start();

    // The operator's site: the two files of sdk/web, a page, and its back end's subscription route,
    // which registers the browser for the signed-in player with the device key.
    site = http.createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://site');
      if (request.method === 'POST' && url.pathname === '/account/push-subscriptions') {
        let body = '';
        request.on('data', (chunk) => (body += chunk));
        request.on('end', () => {
          const given = JSON.parse(body);
          registered.push(given);
          const { endpoint, keys } = given;
          h.registerDevice({ user_id: player, brand_id: brand, provider: 'webpush', platform: 'web', subscription: { endpoint, keys } }).then(
            () => response.writeHead(201).end(),
            () => response.writeHead(502).end(),
          );
        });
        return;
      }
      const file = { '/operator-push-sw.js': 'operator-push-sw.js', '/operator-push.js': 'operator-push.js' }[url.pathname];
      if (file) {
        response.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(path.join(SDK, file)));
        return;
      }
      response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>casino</title><script src="/operator-push.js"></script>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    context = await browser.newContext();
    await context.grantPermissions(['notifications'], { origin });
    // Headless Chromium cannot reach a real push service: PushManager answers with a subscription
    // of the local one, recording the key it was asked to subscribe with.
    const subscription = push.subscription(subscriptionId);
    await context.exposeBinding('subscribedWith', (_source, key: string) => subscribedWith.push(key));
    await context.addInitScript((made) => {
      const g = globalThis as any;
      let current: unknown = null;
      const toBase64Url = (bytes: Uint8Array) => g.btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      g.PushManager.prototype.getSubscription = async () => current;
      g.PushManager.prototype.subscribe = async function (options: { applicationServerKey: ArrayBuffer }) {
        const key = new Uint8Array(options.applicationServerKey);
        await g.subscribedWith(toBase64Url(key));
        current = { endpoint: made.endpoint, options: { applicationServerKey: key.buffer }, toJSON: () => made, unsubscribe: async () => true };
        return current;
      };
    }, subscription);
    page = await context.newPage();
    cdp = await context.newCDPSession(page);
    const registrations: { registrationId: string; scopeURL: string; isDeleted: boolean }[] = [];
    cdp.on('ServiceWorker.workerRegistrationUpdated', (event) => registrations.push(...event.registrations));
    await cdp.send('ServiceWorker.enable');
    await page.goto(`${origin}/`);

    const result = await page.evaluate(
      ({ gateway, brandId }) => (globalThis as any).OperatorPush.subscribe({ api: gateway, register: '/account/push-subscriptions', brandId }),
      { gateway: api, brandId: brand },
    );
    expect(result).toMatchObject({ permission: 'granted', subscription: { endpoint: subscription.endpoint, keys: subscription.keys } });
    await until(() => registrations.some((r) => !r.isDeleted && r.scopeURL === `${origin}/`), 'the service worker registration');
    registrationId = registrations.find((r) => !r.isDeleted && r.scopeURL === `${origin}/`)!.registrationId;
  }, 60000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => site?.close(resolve));
    await dispatcher?.stop();
    if (dispatcherDb) await closeDb(dispatcherDb);
    await worker?.close();
    await h?.close();
    await Promise.all([push?.close(), crm?.close()]);
  });

  it('subscribes through the page helper with the gateway VAPID key, registered by the back end', () => {
    expect(subscribedWith).toEqual([vapid.publicKey]);
    expect(registered).toEqual([{ endpoint: push.endpoint(subscriptionId), keys: expect.any(Object), brand_id: brand }]);
  });

  /** The status webhook's posts for this push, answered 200. */
  const posted = (pushId: string) => crm.received.filter((request: CrmRequest) => request.json?.push_id === pushId && request.status === 200);

  /** Sends a push from the CRM with `fields`, hands what the push service decrypted to the browser, and answers it with the notification the browser holds. */
  async function pushToBrowser(fields: Partial<PushRequest>): Promise<{ pushId: string; plaintext: string; held: Held }> {
    const before = push.receivedFor(subscriptionId).length;
    // The request as the CRM writes it, its meta in the CRM's own text.
    const request = JSON.stringify(pushRequest(brand, player, { ...fields, meta: undefined }));
    const accepted = await h.single(`${request.slice(0, -1)},"meta":${RAW_META}}`);
    expect(accepted.statusCode).toBe(200);
    const pushId: string = accepted.json().push_id;
    mine.add(pushId);
    await until(() => push.receivedFor(subscriptionId).length > before, 'the push at the local push service', 20000);
    const { plaintext } = push.receivedFor(subscriptionId)[before];
    await cdp.send('ServiceWorker.deliverPushMessage', { origin: `${origin}/`, registrationId, data: plaintext });
    // Read once the worker has shown it and reported it: Chromium syncs what getNotifications()
    // answers with what its display holds, and a read while the display is still being made can
    // drop the notification.
    await until(() => posted(pushId).some((r) => r.json.status === 'delivered'), 'the delivered status at the CRM', 20000);
    let held: Held | undefined;
    await until(
      async () => {
        const all: Held[] = await page.evaluate(async () =>
          (await (await (navigator as any).serviceWorker.ready).getNotifications()).map((n: any) => ({
            title: n.title,
            body: n.body,
            icon: n.icon,
            badge: n.badge,
            image: n.image,
            dir: n.dir,
            lang: n.lang,
            renotify: n.renotify,
            requireInteraction: n.requireInteraction,
            silent: n.silent,
            tag: n.tag,
            timestamp: n.timestamp,
            vibrate: [...(n.vibrate ?? [])],
            data: n.data,
          })),
        );
        held = all.find((n) => n.data?.push_id === pushId);
        return !!held;
      },
      'the notification shown',
      10000,
    );
    return { pushId, plaintext, held: held! };
  }

  /** Clicks the push's notification as the browser would, in the worker; answers the window it asked for. */
  async function click(pushId: string): Promise<string | null> {
    const [sw] = context.serviceWorkers();
    return sw.evaluate(async (id) => {
      const scope = globalThis as any;
      let asked: string | null = null;
      // A click a script dispatches carries no user gesture, so the browser would refuse the window:
      // the ask is recorded instead.
      scope.clients.openWindow = async (url: string) => {
        asked = url;
        return null;
      };
      const notifications: any[] = await scope.registration.getNotifications();
      const notification = notifications.find((n) => n.data?.push_id === id);
      scope.dispatchEvent(new (scope.NotificationEvent)('notificationclick', { notification }));
      await new Promise((resolve) => setTimeout(resolve, 200));
      return asked;
    }, pushId);
  }

  it('shows a push with every web field as sent, and the CRM hears delivered and clicked with its meta', async () => {
    const web = {
      icon: 'https://cdn.example.com/icon.png',
      badge: 'https://cdn.example.com/badge.png',
      dir: 'rtl',
      lang: 'ar',
      renotify: 'true',
      require_interaction: 'true',
      silent: 'false',
      tag: 'weekend-reload',
      timestamp: 1764288000,
      vibrate: ['200', '100', '200'],
      link: 'https://casino.example.com/spins?from=push',
    };
    const { pushId, plaintext, held } = await pushToBrowser({
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      image_url: 'https://cdn.example.com/spins.png',
      web: web as Web,
    });
    process.stdout.write(`web-push-browser: every field, as the browser holds it: ${JSON.stringify(held)}\n`);
    expect(held).toEqual({
      title: 'Weekend reload',
      body: 'Your 50 free spins are waiting',
      icon: web.icon,
      badge: web.badge,
      image: 'https://cdn.example.com/spins.png',
      dir: 'rtl',
      lang: 'ar',
      renotify: true,
      requireInteraction: true,
      silent: false,
      tag: 'weekend-reload',
      timestamp: 1764288000 * 1000,
      vibrate: [200, 100, 200],
      data: { push_id: pushId, tracking_token: expect.any(String), link: web.link },
    });
    // What the push service carried is what the worker was handed.
    expect(JSON.parse(plaintext).options.data.push_id).toBe(pushId);

    expect(await click(pushId)).toBe(web.link);
    await until(() => posted(pushId).some((r) => r.json.status === 'clicked'), 'the clicked status at the CRM', 20000);

    const events = posted(pushId).filter((r) => ['delivered', 'clicked'].includes(r.json.status));
    for (const event of events) process.stdout.write(`web-push-browser: the CRM's status webhook got ${event.body}\n`);
    expect(events.map((r) => r.json.status)).toEqual(['delivered', 'clicked']);
    for (const event of events) {
      expect(event.json).toMatchObject({ push_id: pushId, activity: { brand_id: brand, user_id: player } });
      // Byte for byte: the spaces, 1.0, the big number and the escape.
      expect(event.body.endsWith(`,"meta":${RAW_META}}`)).toBe(true);
    }
    // Closed once clicked.
    const stillShown = await page.evaluate(async (id) => (await (await (navigator as any).serviceWorker.ready).getNotifications()).some((n: any) => n.data?.push_id === id), pushId);
    expect(stillShown).toBe(false);
  }, 60000);

  it('shows a push with no web field with none of them, and reports it delivered', async () => {
    const { pushId, plaintext, held } = await pushToBrowser({ title: 'Plain', body: 'Nothing else' });
    process.stdout.write(`web-push-browser: no web field, as the browser holds it: ${JSON.stringify(held)}\n`);
    const token = expect.any(String);
    expect(JSON.parse(plaintext)).toEqual({ title: 'Plain', options: { body: 'Nothing else', data: { push_id: pushId, tracking_token: token } }, push_id: pushId, tracking_token: token });
    expect(held).toEqual({
      title: 'Plain',
      body: 'Nothing else',
      // The browser's own defaults: nothing the CRM did not send.
      icon: '',
      badge: '',
      image: '',
      dir: 'auto',
      lang: '',
      renotify: false,
      requireInteraction: false,
      silent: held.silent === null ? null : false,
      tag: '',
      timestamp: expect.any(Number),
      vibrate: [],
      data: { push_id: pushId, tracking_token: expect.any(String) },
    });
    // A click without a link opens nothing, and still reports.
    expect(await click(pushId)).toBeNull();
    await until(() => posted(pushId).some((r) => r.json.status === 'clicked'), 'the clicked status at the CRM', 20000);
  }, 60000);

  it('shows a silent push with a vibration pattern without the pattern, which the browser refuses', async () => {
    const { held } = await pushToBrowser({ title: 'Quiet', body: 'Shh', web: { silent: 'true', vibrate: ['100', '50', '100'] } });
    expect(held).toMatchObject({ title: 'Quiet', silent: true, vibrate: [] });
  }, 60000);
});
