import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@operator/config';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import { createFcmProvider } from '@operator/provider-fcm';
import { startPushWorker, type PushWorker } from '@operator/push';
import {
  ADMIN_KEY,
  FakeCompliance,
  FakeCrm,
  FakeFcm,
  fcmToken,
  OPERATOR_KEY,
  pushRequest,
  uniqueBrandId,
  uniqueName,
  until,
} from '@operator/testing';
import { createDispatcher, type Dispatcher } from '@operator/webhooks';
import { Harness } from './test/harness';

// The responsible-gambling gate end to end: the gateway accepts the CRM's pushes, an FCM worker
// checks each player against a local operator endpoint (the CRM's /userblocks and /userconsents)
// just before sending to a local FCM, and the CRM reads the outcomes by polling and by webhook.
// What the fake FCM received, per device, is what a player's phones would have shown.

interface FeedEvent {
  event_id: string;
  push_id: string;
  status: string;
  error?: string;
  meta: unknown;
}

type Category = 'excluded' | 'blocked' | 'opted-out' | 'no-entry' | 'allowed';
/** The failed push's error for each category the gate suppresses. */
const REASON: Record<Exclude<Category, 'allowed'>, string> = {
  excluded: 'suppressed:excluded',
  blocked: 'suppressed:blocked',
  'opted-out': 'suppressed:no-consent',
  'no-entry': 'suppressed:no-consent',
};
const API_KEY = 'operator-records-key';
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every event of the feed from where it was last read, as the CRM polls it: kept by push id. */
class Feed {
  private after = '0';
  readonly byPush = new Map<string, FeedEvent[]>();
  constructor(private readonly h: Harness) {}

  async read(): Promise<this> {
    for (;;) {
      const response = await this.h.app.inject({ method: 'GET', url: `/channels/push/events?after=${this.after}&limit=1000`, headers: { 'x-api-key': OPERATOR_KEY } });
      const page = response.json() as { events: FeedEvent[]; next_cursor: string };
      for (const event of page.events) this.byPush.set(event.push_id, [...(this.byPush.get(event.push_id) ?? []), event]);
      this.after = page.next_cursor;
      if (page.events.length < 1000) return this;
    }
  }

  statuses(pushId: string): string[] {
    return (this.byPush.get(pushId) ?? []).map((event) => event.status);
  }
}

describe('the responsible-gambling gate: an FCM worker checking each player against the operator before sending', () => {
  const log = createLogger('compliance-gate', 'silent');
  const dir = mkdtempSync(join(tmpdir(), 'compliance-gate-'));
  let h: Harness;
  let fcm: FakeFcm;
  let operator: FakeCompliance;
  let crm: FakeCrm;
  let dispatcher: Dispatcher;
  let feed: Feed;
  let worker: PushWorker | undefined;

  /** An FCM worker on the gateway's stores, its gate pointed at the fake operator endpoint. */
  async function startWorker(env: Record<string, string>) {
    const serviceAccountFile = join(dir, 'fcm.json');
    writeFileSync(serviceAccountFile, JSON.stringify(fcm.serviceAccount));
    const config = loadPushWorkerConfig('fcm', {
      ...process.env,
      QUEUE_PREFIX: h.stores.config.QUEUE_PREFIX,
      METRICS_PORT: '0',
      PUSH_SEND_BACKOFF_MS: '100',
      // Two cores shared with the stores: a few jobs at once keep the worker and PostgreSQL busy enough.
      PUSH_WORKER_CONCURRENCY: '4',
      FCM_SERVICE_ACCOUNT_FILE: serviceAccountFile,
      COMPLIANCE_URL: operator.url,
      COMPLIANCE_API_KEY: API_KEY,
      COMPLIANCE_CONCURRENCY: '16',
      ...env,
    });
    worker = await startPushWorker('fcm', config, log, () => createFcmProvider({ serviceAccount: fcm.serviceAccount, httpAgent: fcm.agent }));
  }

  async function stopWorker() {
    await worker?.close();
    worker = undefined;
  }

  /** Registers one FCM device per token for the player. */
  async function devices(brand: number, player: string, count = 1): Promise<string[]> {
    const tokens = Array.from({ length: count }, () => fcmToken());
    for (const token of tokens) await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token });
    return tokens;
  }

  /** Sends FCM took, per token. */
  const deliveredByToken = () => {
    const counts = new Map<string, number>();
    for (const send of fcm.delivered) if (send.token) counts.set(send.token, (counts.get(send.token) ?? 0) + 1);
    return counts;
  };
  /** Sends to this token FCM took. */
  const received = (token: string) => deliveredByToken().get(token) ?? 0;

  /** Sends one push each to these players in batches of at most BATCH_MAX_MESSAGES; answers each player's push id. */
  async function campaign(brand: number, players: string[], meta: (player: string) => Record<string, unknown>): Promise<Map<string, string>> {
    const requests = players.map((player) => pushRequest(brand, player, { meta: meta(player) }));
    const playerOf = new Map(requests.map((request) => [request.activity.id, request.activity.user_id]));
    const pushIds = new Map<string, string>();
    const most = h.stores.config.BATCH_MAX_MESSAGES;
    for (let start = 0; start < requests.length; start += most) {
      const response = await h.batch(requests.slice(start, start + most));
      expect(response.statusCode).toBe(200);
      const body = response.json() as { successful: { id: number; push_id: string }[]; failed: unknown[]; fatal: unknown[] };
      expect({ failed: body.failed, fatal: body.fatal }).toEqual({ failed: [], fatal: [] });
      for (const { id, push_id } of body.successful) pushIds.set(playerOf.get(id)!, push_id);
    }
    expect(pushIds.size).toBe(players.length);
    return pushIds;
  }

  const status = async (pushId: string) => (await h.app.inject({ method: 'GET', url: `/channels/push/${pushId}`, headers: { 'x-api-key': OPERATOR_KEY } })).json();

  /** The events the fake CRM took for these pushes (one per POST or arrays of them). */
  function webhookEvents(pushIds: Set<string>): FeedEvent[] {
    return crm.accepted
      .flatMap((request) => (Array.isArray(request.json) ? request.json : [request.json]) as FeedEvent[])
      .filter((event) => event && pushIds.has(event.push_id));
  }

  /** Announces, as the operator's back end tells the CRM, that these players' blocks changed. */
  const announce = (userIds: string[]) =>
    h.request(
      ADMIN_KEY,
      'POST',
      '/v1/compliance/events',
      userIds.map((user_id) => ({ user_id, timestamp: new Date().toISOString(), origin: 'casino.example.com' })),
    );

  beforeAll(async () => {
    [fcm, operator, crm] = await Promise.all([FakeFcm.start(), FakeCompliance.start({ apiKey: API_KEY }), FakeCrm.start()]);
    h = await Harness.open();
    feed = new Feed(h);
    dispatcher = createDispatcher({
      db: h.stores.db,
      log: silent,
      urls: { 'push.status': crm.url('/webhooks/push-status') },
      secret: 'whsec-test-secret',
      auth: {},
      statusBatchMax: 100,
      timeoutMs: 2000,
      concurrency: 4,
      batchSize: 200,
      leaseMs: 5000,
      maxAgeMs: 3_600_000,
      backoffMs: 20,
      maxBackoffMs: 200,
      idleMs: 50,
    });
    dispatcher.start();
  }, 60000);

  afterAll(async () => {
    await stopWorker();
    await dispatcher?.stop();
    await h?.close();
    await Promise.all([fcm?.close(), operator?.close(), crm?.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('with answers cached for a minute', () => {
    beforeAll(async () => startWorker({ COMPLIANCE_CACHE_TTL: '60s' }), 30000);
    afterAll(async () => stopWorker());

    it('sends a campaign of 1,000 only to the 730 players who may get it, and reports the 270 failed with the reason and meta', async () => {
      const brand = uniqueBrandId();
      const campaignId = uniqueName('rg-campaign');
      const categories: Category[] = [
        ...Array<Category>(100).fill('excluded'),
        ...Array<Category>(50).fill('blocked'),
        ...Array<Category>(100).fill('opted-out'),
        ...Array<Category>(20).fill('no-entry'),
        ...Array<Category>(730).fill('allowed'),
      ];
      // Spread over the batches, as a CRM's segment would be.
      for (let i = categories.length - 1; i > 0; i -= 1) {
        const j = Math.floor(Math.random() * (i + 1));
        [categories[i], categories[j]] = [categories[j], categories[i]];
      }
      const players = categories.map((category, i) => ({ id: uniqueName(`rg-${category}-${i}`), category, tokens: [] as string[] }));
      // Every tenth player has two phones: still one lookup, and nothing to either when suppressed.
      for (const [i, player] of players.entries()) player.tokens = await devices(brand, player.id, i % 10 === 0 ? 2 : 1);
      for (const player of players) {
        if (player.category === 'excluded') operator.block(player.id, 'Excluded');
        else if (player.category === 'blocked') operator.block(player.id, 'Blocked');
        else if (player.category === 'opted-out') operator.optOut(player.id);
        else if (player.category === 'no-entry') operator.noConsentEntry(player.id);
        else operator.allow(player.id);
      }

      const meta = (player: string) => ({ campaign: campaignId, player });
      const pushIds = await campaign(brand, players.map((player) => player.id), meta);
      const allowed = players.filter((player) => player.category === 'allowed');
      const suppressed = players.filter((player) => player.category !== 'allowed');
      expect([allowed.length, suppressed.length]).toEqual([730, 270]);

      // Every push settled in the feed: the allowed sent, the others failed.
      await until(
        async () => {
          await feed.read();
          return players.every((player) => feed.statuses(pushIds.get(player.id)!).some((s) => s === 'sent' || s === 'failed'));
        },
        'every push of the campaign settled in the feed',
        60000,
      );
      await until(() => {
        const counts = deliveredByToken();
        return allowed.every((player) => player.tokens.every((token) => counts.has(token)));
      }, 'every device of the allowed players reached', 30000);

      // Exactly the allowed players' devices, each once; nothing to a suppressed player's.
      const counts = deliveredByToken();
      for (const player of allowed) for (const token of player.tokens) expect([player.category, counts.get(token)]).toEqual(['allowed', 1]);
      for (const player of suppressed) for (const token of player.tokens) expect([player.category, fcm.sendsTo(token).length]).toEqual([player.category, 0]);
      const ours = new Set(players.flatMap((player) => player.tokens));
      expect(fcm.requests.filter((send) => send.token !== undefined && ours.has(send.token)).length).toBe(allowed.reduce((n, player) => n + player.tokens.length, 0));

      // Polling: each suppressed push failed once, with its reason and its meta; each allowed one sent.
      await feed.read();
      for (const player of suppressed) {
        const events = feed.byPush.get(pushIds.get(player.id)!) ?? [];
        expect(events.map(({ status: s, error, meta: m }) => ({ s, error, m }))).toEqual([
          { s: 'failed', error: REASON[player.category as Exclude<Category, 'allowed'>], m: meta(player.id) },
        ]);
      }
      for (const player of allowed) {
        const events = feed.byPush.get(pushIds.get(player.id)!) ?? [];
        expect(events.map((event) => [event.status, event.meta])).toEqual([['sent', meta(player.id)]]);
      }
      // The push's own status, as the CRM reads one: failed, the reason, every delivery failed.
      for (const player of suppressed.slice(0, 20)) {
        const answer = await status(pushIds.get(player.id)!);
        expect(answer).toMatchObject({ status: 'failed', error: REASON[player.category as Exclude<Category, 'allowed'>] });
        expect(answer.deliveries.map((d: { status: string }) => d.status)).toEqual(player.tokens.map(() => 'failed'));
      }

      // Webhook: the same 270 failures, each with its reason and meta.
      const suppressedIds = new Set(suppressed.map((player) => pushIds.get(player.id)!));
      await until(() => new Set(webhookEvents(suppressedIds).map((event) => event.push_id)).size === 270 || undefined, 'the 270 failures at the CRM', 30000);
      const byPush = new Map(webhookEvents(suppressedIds).map((event) => [event.push_id, event]));
      for (const player of suppressed) {
        expect(byPush.get(pushIds.get(player.id)!)).toMatchObject({
          status: 'failed',
          error: REASON[player.category as Exclude<Category, 'allowed'>],
          meta: meta(player.id),
        });
      }

      // The devices stay active (the player may opt in again).
      const inactive = await h.stores.db.device.count({ where: { brandId: BigInt(brand), active: false } });
      expect(inactive).toBe(0);
      // One lookup per player, whatever the number of devices.
      for (const player of players) expect([player.id, operator.asked(player.id).blocks]).toEqual([player.id, 1]);
      expect(operator.unauthorized).toBe(0);
    }, 150000);

    it('sends none of the later pushes to a player excluded mid-campaign, once the operator announces it', async () => {
      const brand = uniqueBrandId();
      const player = uniqueName('rg-later-excluded');
      const other = uniqueName('rg-still-allowed');
      const [token] = await devices(brand, player);
      const [otherToken] = await devices(brand, other);
      operator.allow(player).allow(other);

      // The campaign's first wave reaches both (and the worker keeps their answers for a minute).
      const first = await campaign(brand, [player, other], () => ({ wave: 1 }));
      await until(() => received(token) === 1 && received(otherToken) === 1, 'the first wave at both players', 30000);
      await until(async () => (await status(first.get(player)!)).status === 'sent', 'the first push sent');

      // The player self-excludes: the operator's records change, and it says so as it tells the CRM.
      operator.block(player, 'Excluded');
      const announced = await announce([player]);
      expect(announced.statusCode).toBe(202);
      expect(announced.json()).toEqual({ players: 1 });
      // The worker hears it over Redis within milliseconds; the next waves come well after.
      await sleep(300);

      const later = [await campaign(brand, [player, other], () => ({ wave: 2 })), await campaign(brand, [player, other], () => ({ wave: 3 }))];
      await until(() => received(otherToken) === 3, 'the later waves at the other player', 30000);
      for (const wave of later) await until(async () => (await status(wave.get(player)!)).status === 'failed', 'the later pushes to the excluded player failed');
      for (const wave of later) expect(await status(wave.get(player)!)).toMatchObject({ status: 'failed', error: 'suppressed:excluded' });
      expect(fcm.sendsTo(token)).toHaveLength(1);
      expect(operator.asked(player).blocks).toBe(2);
    }, 60000);
  });

  describe('while the operator endpoint answers 503', () => {
    beforeAll(async () => startWorker({ COMPLIANCE_CACHE_TTL: '1s' }), 30000);
    afterAll(async () => stopWorker());

    it('holds the sends for the 30 s it refuses, sends none unchecked, then sends them once it answers', async () => {
      const brand = uniqueBrandId();
      const players = Array.from({ length: 20 }, (_, i) => ({ id: uniqueName(`rg-outage-${i}`), tokens: [] as string[], excluded: i < 5 }));
      for (const player of players) {
        player.tokens = await devices(brand, player.id);
        if (player.excluded) operator.block(player.id, 'Excluded');
        else operator.allow(player.id);
      }
      // Taken before the fake starts refusing: no send may come before it.
      const outageEnds = Date.now() + 30_000;
      operator.clearCounts().unavailable(30_000);
      const pushIds = await campaign(brand, players.map((player) => player.id), () => ({ campaign: 'during-outage' }));

      // The worker asks, is refused, and waits: nothing reaches any of their devices meanwhile.
      await until(() => operator.refused >= players.length || undefined, 'the worker to ask the refusing endpoint', 20000);
      while (Date.now() < outageEnds - 1000) {
        for (const player of players) for (const token of player.tokens) expect(fcm.sendsTo(token)).toEqual([]);
        await sleep(1000);
      }
      for (const player of players) {
        const answer = await status(pushIds.get(player.id)!);
        expect([player.id, answer.status]).toEqual([player.id, 'accepted']);
      }
      // Asked again during the outage (a back-off, not a single try): waiting, not given up.
      expect(operator.refused).toBeGreaterThan(players.length);

      // Once it answers, the allowed go out, each once; the excluded fail, never sent.
      await until(async () => {
        for (const player of players) if (!['sent', 'failed'].includes((await status(pushIds.get(player.id)!)).status)) return undefined;
        return true;
      }, 'every push of the outage settled once the endpoint answers', 45000);
      const firstSend = Math.min(...players.flatMap((player) => player.tokens.flatMap((token) => fcm.sendsTo(token).map((send) => send.at))));
      expect(firstSend).toBeGreaterThanOrEqual(outageEnds);
      for (const player of players) {
        const answer = await status(pushIds.get(player.id)!);
        if (player.excluded) {
          expect(answer).toMatchObject({ status: 'failed', error: 'suppressed:excluded' });
          expect(fcm.sendsTo(player.tokens[0])).toEqual([]);
        } else {
          expect(answer.status).toBe('sent');
          expect(received(player.tokens[0])).toBe(1);
        }
      }
    }, 90000);
  });
});
