import { ADMIN_KEY, DEVICE_KEY, fcmToken, INTERNAL_KEY, OPERATOR_KEY, uniqueBrandId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// The operator's back end holds keys of two classes: a device key (INTERNAL_DEVICE_KEYS) registers,
// lists and removes devices and nothing else; an admin key (INTERNAL_ADMIN_KEYS) opens every
// internal route. INTERNAL_API_KEYS are back-end keys that open every internal route, as admin keys do.

const NO_SUCH_ID = '00000000-0000-7000-8000-000000000000';

/**
 * Every internal route that is not a device route, with a body where it takes one. Three to a row:
 * jest takes a test with more parameters than its row for one that waits for done().
 */
const ADMIN_ROUTES: [method: 'GET' | 'POST' | 'PUT', url: string, body: unknown][] = [
  ['GET', '/v1/credits', undefined],
  ['GET', `/v1/credits/${NO_SUCH_ID}`, undefined],
  ['GET', '/v1/bonuses', undefined],
  ['PUT', '/v1/bonuses/KEYS_TEST', { label: 'x', type: 'FreeSpins', product: 'Casino', amount: '1.00', currency: 'EUR', validity_days: 1, wagering_requirement: 0 }],
  ['GET', '/v1/players/p-1/wallet', undefined],
  ['GET', '/v1/players/p-1/ledger', undefined],
  ['GET', '/v1/players/p-1/bonuses', undefined],
  ['POST', `/v1/players/p-1/bonuses/${NO_SUCH_ID}/status`, { status: 'Completed' }],
  ['GET', '/v1/webhooks/dead-letters', undefined],
  ['POST', '/v1/webhooks/dead-letters/redrive', { event_ids: [NO_SUCH_ID] }],
  ['POST', '/v1/compliance/events', { user_id: 'p-1' }],
];

describe('internal keys by what they open', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await Harness.open({ ADMIN_UI: 'true' });
  });
  afterAll(() => h.close());

  const send = (method: string, url: string, key: string | undefined, body?: unknown) =>
    h.app.inject({
      method: method as 'GET',
      url,
      headers: { ...(key === undefined ? {} : { 'x-api-key': key }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      payload: body === undefined ? undefined : JSON.stringify(body),
    });

  const device = () => ({ user_id: uniqueName('player'), brand_id: uniqueBrandId(), provider: 'fcm', platform: 'android', token: fcmToken() });

  it.each([
    ['a device key', DEVICE_KEY],
    ['an admin key', ADMIN_KEY],
    ['a key of INTERNAL_API_KEYS', INTERNAL_KEY],
  ])('registers, lists and removes devices with %s', async (_name, key) => {
    const registration = device();
    const created = await send('POST', '/v1/devices', key, registration);
    expect(created.statusCode).toBe(201);
    const listed = await send('GET', `/v1/players/${registration.user_id}/devices`, key);
    expect(listed.statusCode).toBe(200);
    expect(listed.json().devices.map((d: { token: string }) => d.token)).toEqual([registration.token]);
    expect((await send('DELETE', `/v1/devices/${created.json().id}`, key)).statusCode).toBe(204);
  });

  it.each(ADMIN_ROUTES)('refuses a device key on %s %s with 403 {error}, before reading the body', async (method, url, body) => {
    const response = await send(method, url, DEVICE_KEY, body);
    expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 403, body: { error: expect.stringContaining('admin key'), code: 403 } });
    const broken = await h.app.inject({ method, url, headers: { 'x-api-key': DEVICE_KEY, 'content-type': 'application/json' }, payload: '{"broken' });
    expect(broken.statusCode).toBe(403);
  });

  it.each(ADMIN_ROUTES)('refuses %s %s with 401 to no key, an unknown key and the CRM key, as before', async (method, url, body) => {
    for (const key of [undefined, 'not-a-key-of-any-class', OPERATOR_KEY]) {
      const response = await send(method, url, key, body);
      expect({ key, status: response.statusCode }).toEqual({ key, status: 401 });
    }
  });

  it('reads the credits with an admin key and with a key of INTERNAL_API_KEYS, not with a device key', async () => {
    const player = uniqueName('player');
    const credit = await h.post('/bonus/credit/funds', { user_id: player, amount: 5, currency: 'EUR' }, { 'X-Service-Id': uniqueName('svc') });
    expect(credit.statusCode).toBe(200);
    for (const key of [ADMIN_KEY, INTERNAL_KEY]) {
      const response = await send('GET', `/v1/credits?user_id=${player}`, key);
      expect(response.statusCode).toBe(200);
      expect(response.json().credits).toHaveLength(1);
    }
    expect((await send('GET', `/v1/credits?user_id=${player}`, DEVICE_KEY)).statusCode).toBe(403);
  });

  it('opens the queue dashboard to admin keys only', async () => {
    expect((await send('GET', '/admin/queues', ADMIN_KEY)).statusCode).toBe(200);
    expect((await send('GET', '/admin/queues', INTERNAL_KEY)).statusCode).toBe(200);
    const refused = await send('GET', '/admin/queues', DEVICE_KEY);
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['www-authenticate']).toMatch(/^Basic realm=/);
  });
});

describe('scoped keys alone, INTERNAL_API_KEYS empty', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await Harness.open({ INTERNAL_API_KEYS: '' });
  });
  afterAll(() => h.close());

  it('takes the device and admin keys and nothing else: neither the development key nor the key of old', async () => {
    const get = (key: string) => h.app.inject({ method: 'GET', url: '/v1/credits', headers: { 'x-api-key': key } });
    expect((await get(ADMIN_KEY)).statusCode).toBe(200);
    expect((await get(DEVICE_KEY)).statusCode).toBe(403);
    expect((await get('dev-internal-key')).statusCode).toBe(401);
    expect((await get(INTERNAL_KEY)).statusCode).toBe(401);
  });
});
