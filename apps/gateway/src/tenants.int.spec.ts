import { randomUUID } from 'node:crypto';
import { createBonusDeps, runBonusRound } from '@operator/bonus';
import { fcmToken, pushRequest, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { Harness } from './test/harness';

// Brands as tenants, end to end on a production gateway: two CRM keys and a device key bound to one
// brand each, beside keys that open every brand.

const SECRET = 'tenants-spec-tracking-secret-0123456789';
const BRAND_1 = uniqueBrandId();
const BRAND_2 = uniqueBrandId();
const KEYS = {
  K_ALL: 'crm-key-all-brands-Zq3VfN1xLw5Tb7Ry2K',
  K1: 'crm-key-brand-one-Pt4Ys9Fk2Hw6Nz1Rd8',
  K2: 'crm-key-brand-two-Vb8Qm2Xr5Tn9Lw3Hc7',
  D_ALL: 'device-key-all-brands-Rw7Kq2Zn9Xb4Vt',
  D1: 'device-key-brand-one-Hm1Lp3Gs8Ye6Jd2',
  ADMIN: 'admin-key-all-brands-Fk2Hw6Nz1Rd8Gx4',
};
const PRODUCTION = {
  NODE_ENV: 'production',
  TRACKING_SECRET: SECRET,
  METRICS_PORT: '0',
  OPERATOR_API_KEYS: `${KEYS.K_ALL},${KEYS.K1}@${BRAND_1},${KEYS.K2}@${BRAND_2}`,
  INTERNAL_DEVICE_KEYS: `${KEYS.D_ALL},${KEYS.D1}@${BRAND_1}`,
  INTERNAL_ADMIN_KEYS: KEYS.ADMIN,
  INTERNAL_API_KEYS: 'backend-key-all-brands-Ys9Fk2Hw6Nz1R',
};
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

interface FeedEvent {
  cursor: string;
  push_id: string;
  status: string;
  activity: { brand_id: number };
}

describe('brands as tenants on a production gateway', () => {
  let h: Harness;
  let player: string;


  beforeAll(async () => {
    h = await Harness.open(PRODUCTION);
  });
  afterAll(async () => {
    await h.close();
  });

  beforeEach(async () => {
    player = uniqueName('player');
    for (const brand of [BRAND_1, BRAND_2]) {
      const response = await request('POST', '/v1/devices', KEYS.D_ALL, { user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
      expect(response.statusCode).toBe(201);
    }
  });

  const request = (method: 'GET' | 'POST' | 'DELETE', url: string, key: string, body?: unknown, headers: Record<string, string> = {}) =>
    h.request(key, method, url, body, headers);
  const push = (key: string, brand: number) => request('POST', '/channels/push/single', key, pushRequest(brand, player));

  /** Every feed event from `after` on, read page by page with `key`. */
  async function feed(key: string, after: string, limit: number): Promise<FeedEvent[]> {
    const events: FeedEvent[] = [];
    for (let pages = 0; pages < 10000; pages++) {
      const page = (await request('GET', `/channels/push/events?after=${after}&limit=${limit}`, key)).json() as { events: FeedEvent[]; next_cursor: string };
      events.push(...page.events);
      if (page.next_cursor === after) return events;
      after = page.next_cursor;
    }
    throw new Error('the feed did not end');
  }

  it('lets K1 push to and read brand 1 only', async () => {
    const start = (await request('GET', '/channels/push/events?after=0&limit=1', KEYS.K_ALL)).json().next_cursor as string;
    const mine = await push(KEYS.K1, BRAND_1);
    expect(mine.statusCode).toBe(200);
    const refused = await push(KEYS.K1, BRAND_2);
    expect({ status: refused.statusCode, body: refused.json() }).toEqual({ status: 403, body: { error: expect.stringContaining(String(BRAND_2)), code: 403 } });
    const theirs = await push(KEYS.K2, BRAND_2);
    expect(theirs.statusCode).toBe(200);
    const [mineId, theirsId] = [mine.json().push_id as string, theirs.json().push_id as string];

    expect((await request('GET', `/channels/push/${mineId}`, KEYS.K1)).statusCode).toBe(200);
    const other = await request('GET', `/channels/push/${theirsId}`, KEYS.K1);
    expect({ status: other.statusCode, body: other.json() }).toEqual({ status: 404, body: { error: `no push ${theirsId}`, code: 404 } });
    const list = (await request('GET', `/channels/push/status?push_id=${mineId}&push_id=${theirsId}`, KEYS.K1)).json();
    expect({ found: list.pushes.map((p: { push_id: string }) => p.push_id), not_found: list.not_found }).toEqual({ found: [mineId], not_found: [theirsId] });

    // Both sent (a status event each), then the feed read by key.
    expect(await h.send([mineId, theirsId])).toMatchObject({ kind: 'done', sent: 2 });
    await until(async () => (await feed(KEYS.K_ALL, start, 1000)).filter((e) => e.push_id === mineId || e.push_id === theirsId).length === 2, 'both events in the feed', 20000);
    const k1 = await feed(KEYS.K1, start, 1);
    expect(k1.filter((e) => e.push_id === mineId).map((e) => e.status)).toEqual(['sent']);
    expect(k1.every((e) => e.activity.brand_id === BRAND_1)).toBe(true);
    expect(new Set(k1.map((e) => e.cursor)).size).toBe(k1.length);
    const all = await feed(KEYS.K_ALL, start, 1000);
    expect(all.filter((e) => e.push_id === theirsId).map((e) => e.status)).toEqual(['sent']);
  });

  it('lets D1 list and register brand-1 devices only', async () => {
    const listed = await request('GET', `/v1/players/${encodeURIComponent(player)}/devices`, KEYS.D1);
    expect(listed.statusCode).toBe(200);
    expect(listed.json().devices.map((d: { brand_id: number }) => d.brand_id)).toEqual([BRAND_1]);
    const everyBrand = await request('GET', `/v1/players/${encodeURIComponent(player)}/devices`, KEYS.D_ALL);
    expect(everyBrand.json().devices.map((d: { brand_id: number }) => d.brand_id).sort()).toEqual([BRAND_1, BRAND_2].sort());
    const refused = await request('POST', '/v1/devices', KEYS.D1, { user_id: player, brand_id: BRAND_2, provider: 'fcm', platform: 'android', token: fcmToken() });
    expect({ status: refused.statusCode, body: refused.json() }).toEqual({ status: 403, body: { error: expect.any(String), code: 403 } });
  });

  it('makes the same X-Service-Id under K1 and K2 two credits, completed into two wallets', async () => {
    const serviceId = `svc-${randomUUID()}`;
    const headers = { 'X-Service-Id': serviceId, 'X-Service-Activityid': '41', 'X-Service-Actionid': '7', 'X-Service-Actiongroupid': '3', 'X-Service-Triggerhash': uniqueName('hash') };
    const body = { user_id: player, amount: 12.5, currency: 'EUR' };
    const first = await request('POST', '/bonus/credit/funds', KEYS.K1, body, headers);
    const second = await request('POST', '/bonus/credit/funds', KEYS.K2, body, headers);
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
    const ids = [first.json().credit_id as string, second.json().credit_id as string];
    expect(ids[0]).not.toBe(ids[1]);
    // A retry under K1 is the same credit.
    expect((await request('POST', '/bonus/credit/funds', KEYS.K1, body, headers)).json().credit_id).toBe(ids[0]);

    const deps = createBonusDeps(h.stores.db, h.stores.config, silent);
    await until(async () => {
      await runBonusRound(deps);
      const rows = await h.stores.db.credit.findMany({ where: { id: { in: ids } } });
      return rows.every((row) => row.status === 'completed');
    }, 'both credits completed', 30000);
    const wallets = await h.stores.db.$queryRawUnsafe<{ brand: string; balance: string }[]>(
      `SELECT brand_id::text AS brand, balance_minor::text AS balance FROM accounts WHERE owner = $1 AND kind = 'real_money' ORDER BY brand_id`,
      player,
    );
    expect(wallets).toEqual([String(BRAND_1), String(BRAND_2)].sort((a, b) => Number(a) - Number(b)).map((brand) => ({ brand, balance: '1250' })));
  });
});
