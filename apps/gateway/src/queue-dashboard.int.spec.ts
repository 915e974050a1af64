import { INTERNAL_KEY, OPERATOR_KEY } from '@operator/testing';
import { Harness } from './test/harness';

// The queue dashboard (bull-board) at /admin/queues, with ADMIN_UI=true: an admin key opens it, as
// X-Api-Key or as the password of HTTP Basic (any user name), for its page, its assets and its API
// alike. Here outside production, on PORT; in production on METRICS_PORT (operations.int.spec.ts).

const BRAND_ADMIN_KEY = 'brand-seven-admin-key';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('the queue dashboard', () => {
  let h: Harness;

  beforeAll(async () => {
    // The queues hold every brand's jobs: an admin key bound to a brand does not open them.
    h = await Harness.open({ ADMIN_UI: 'true', INTERNAL_API_KEYS: INTERNAL_KEY, INTERNAL_ADMIN_KEYS: `${BRAND_ADMIN_KEY}@7` });
  });
  afterAll(async () => {
    await h.close();
  });

  const get = (url: string, headers: Record<string, string> = {}) => h.app.inject({ method: 'GET', url, headers });

  it.each([
    ['no credentials', {}],
    ['the CRM key', { 'x-api-key': OPERATOR_KEY }],
    ['a wrong X-Api-Key', { 'x-api-key': 'wrong' }],
    ['Basic with a wrong password', { authorization: basic('ops', 'wrong') }],
    ['Basic with the CRM key as password', { authorization: basic('ops', OPERATOR_KEY) }],
    ['Basic with the internal key as user name', { authorization: basic(INTERNAL_KEY, '') }],
    ['an admin key bound to a brand', { 'x-api-key': BRAND_ADMIN_KEY }],
    ['Basic with an admin key bound to a brand', { authorization: basic('ops', BRAND_ADMIN_KEY) }],
  ])('refuses %s with 401 {error} and asks the browser for Basic credentials', async (_case, headers) => {
    for (const url of ['/admin/queues', '/admin/queues/api/queues', '/admin/queues/static/css/main.css']) {
      const response = await get(url, headers as Record<string, string>);
      expect({ url, status: response.statusCode, body: response.json() }).toEqual({ url, status: 401, body: { error: expect.any(String), code: 401 } });
      expect(response.headers['www-authenticate']).toMatch(/^Basic realm="[^"]+"/);
    }
  });

  it('opens with the internal key as X-Api-Key', async () => {
    const page = await get('/admin/queues', { 'x-api-key': INTERNAL_KEY });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
  });

  it('opens with Basic auth, any user name and the internal key as password: the page, its assets and the push queues', async () => {
    const authorization = basic('anyone', INTERNAL_KEY);
    const page = await get('/admin/queues', { authorization });
    expect(page.statusCode).toBe(200);
    // The page loads its scripts from the dashboard's own static path, behind the same key.
    expect(page.body).toContain('<base href="/admin/queues/" />');
    const script = /src="(static\/js\/main\.[^"]+\.js)"/.exec(page.body)?.[1];
    expect(script).toBeDefined();
    const asset = await get(`/admin/queues/${script}`, { authorization });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);

    const api = await get('/admin/queues/api/queues', { authorization });
    expect(api.statusCode).toBe(200);
    const names = (api.json().queues as { name: string }[]).map((queue) => queue.name).sort();
    expect(names).toEqual(['push-apns', 'push-fcm', 'push-hms', 'push-onesignal', 'push-webpush']);
  });
});

describe.each([
  ['by default', {}],
  ['with ADMIN_UI=false', { ADMIN_UI: 'false' }],
])('the queue dashboard %s', (_case, env) => {
  let h: Harness;

  beforeAll(async () => {
    h = await Harness.open(env);
  });
  afterAll(async () => {
    await h.close();
  });

  it('is not there: 404 {error}, even with the internal key', async () => {
    for (const url of ['/admin/queues', '/admin/queues/api/queues']) {
      const response = await h.app.inject({ method: 'GET', url, headers: { 'x-api-key': INTERNAL_KEY } });
      expect({ url, status: response.statusCode, body: response.json() }).toEqual({ url, status: 404, body: { error: expect.any(String), code: 404 } });
    }
  });
});
