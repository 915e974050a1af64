import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { MetricsPortError } from '@operator/metrics';
import { fcmToken, pushRequest, uniqueBrandId, uniqueName } from '@operator/testing';
import { listenOperations } from './operations';
import { Harness } from './test/harness';

// In production the gateway serves its operators apart from the API: /metrics, /docs,
// /openapi.json and the queue dashboard (ADMIN_UI=true, behind an admin key) on METRICS_PORT, and
// 404 on PORT, so a load balancer that forwards PORT shows none of them. /health/* answer on both:
// the probes use PORT. Outside production they stay on PORT (metrics.int.spec.ts, openapi.int.spec.ts).

const KEYS = {
  OPERATOR_API_KEYS: 'crm-key-Zq3VfN1xLw5Tb7Ry2Kp9Hs4M',
  INTERNAL_DEVICE_KEYS: 'device-key-Ue6Wd0Qa8Jg3Xn1Vc5Bm7L',
  INTERNAL_ADMIN_KEYS: 'admin-key-Pt4Ys9Fk2Hw6Nz1Rd8GxQe',
  INTERNAL_API_KEYS: '',
};
const PRODUCTION = { NODE_ENV: 'production', TRACKING_SECRET: 'tracking-secret-3q9VwXk2LmZr7TbN5yHc', METRICS_PORT: '0', ...KEYS };
const OPERATIONS = ['/metrics', '/docs', '/docs/static/swagger-ui-bundle.js', '/openapi.json', '/admin/queues', '/admin/queues/api/queues'];

const basic = (password: string) => `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;

/** The operations server listening as main.ts has it listen, with its base URL. */
async function listening(operations: FastifyInstance, h: Harness) {
  await listenOperations(operations, { ...h.stores.config, HOST: '127.0.0.1' });
  return `http://127.0.0.1:${(operations.server.address() as AddressInfo).port}`;
}

describe('a production gateway', () => {
  let h: Harness;
  let base: string;

  beforeAll(async () => {
    h = await Harness.open(PRODUCTION);
    base = await listening(h.operations!, h);
  });
  afterAll(() => h.close());

  it.each(OPERATIONS)('answers 404 {error} for %s on PORT, even with an admin key', async (url) => {
    const response = await h.app.inject({ method: 'GET', url, headers: { 'x-api-key': KEYS.INTERNAL_ADMIN_KEYS } });
    expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 404, body: { error: expect.any(String), code: 404 } });
  });

  it('keeps the API and the probes on PORT', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    const device = { user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() };
    const registered = await h.app.inject({ method: 'POST', url: '/v1/devices', headers: { 'x-api-key': KEYS.INTERNAL_DEVICE_KEYS }, payload: device });
    expect(registered.statusCode).toBe(201);
    const pushed = await h.app.inject({ method: 'POST', url: '/channels/push/single', headers: { 'x-api-key': KEYS.OPERATOR_API_KEYS }, payload: pushRequest(brand, player) });
    expect(pushed.statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/health/live' })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/health/ready' })).json()).toMatchObject({ status: 'ready', postgres: 'up', redis: 'up' });
  });

  it('says on PORT whether it is ready and each store up or down, and names no server; METRICS_PORT names the Redis server', async () => {
    const address = /127\.0\.0\.1|localhost|:\d{2,5}\b|redis:\/\/|postgres(ql)?:\/\//;
    const onPort = await h.app.inject({ method: 'GET', url: '/health/ready' });
    expect({ status: onPort.statusCode, body: onPort.json() }).toEqual({ status: 200, body: { status: 'ready', postgres: 'up', redis: 'up' } });
    expect(onPort.body).not.toMatch(address);
    const full = await fetch(`${base}/health/ready`);
    expect(full.status).toBe(200);
    expect(await full.json()).toEqual({ status: 'ready', postgres: 'up', redis: 'up', redis_server: { mode: 'standalone', role: 'master', address: expect.stringMatching(/^127\.0\.0\.1:\d+$/) } });
  });

  it('serves /metrics on METRICS_PORT, counting the requests of PORT', async () => {
    await h.app.inject({ method: 'GET', url: '/health/live' });
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await response.text();
    expect(text).toMatch(/^operator_http_request_duration_seconds_count\{method="GET",route="\/health\/live",status="200"\} \d+$/m);
    expect(text).toMatch(/^operator_queue_jobs\{queue="push-fcm",state="waiting"\} \d+$/m);
  });

  it("serves the API's document and its page on METRICS_PORT", async () => {
    const document = await fetch(`${base}/openapi.json`);
    expect(document.status).toBe(200);
    expect(await document.json()).toEqual(JSON.parse(JSON.stringify(h.app.swagger())));
    const page = await fetch(`${base}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toContain('swagger-ui');
    expect((await fetch(`${base}/docs/static/swagger-ui-bundle.js`)).status).toBe(200);
  });

  it('answers the probes on METRICS_PORT too, and nothing of the API there', async () => {
    expect(await (await fetch(`${base}/health/live`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${base}/health/ready`)).json()).toMatchObject({ status: 'ready', postgres: 'up', redis: 'up' });
    const api = await fetch(`${base}/v1/credits`, { headers: { 'x-api-key': KEYS.INTERNAL_ADMIN_KEYS } });
    expect(api.status).toBe(404);
  });

  it('has no queue dashboard without ADMIN_UI=true', async () => {
    for (const url of ['/admin/queues', '/admin/queues/api/queues']) {
      const response = await fetch(`${base}${url}`, { headers: { authorization: basic(KEYS.INTERNAL_ADMIN_KEYS) } });
      expect({ url, status: response.status }).toEqual({ url, status: 404 });
    }
  });
});

describe('a production gateway with ADMIN_UI=true', () => {
  let h: Harness;
  let base: string;

  beforeAll(async () => {
    h = await Harness.open({ ...PRODUCTION, ADMIN_UI: 'true' });
    base = await listening(h.operations!, h);
  });
  afterAll(() => h.close());

  it('serves the queue dashboard on METRICS_PORT to an admin key, and never on PORT', async () => {
    const page = await fetch(`${base}/admin/queues`, { headers: { authorization: basic(KEYS.INTERNAL_ADMIN_KEYS) } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const queues = await fetch(`${base}/admin/queues/api/queues`, { headers: { 'x-api-key': KEYS.INTERNAL_ADMIN_KEYS } });
    expect(queues.status).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/admin/queues', headers: { 'x-api-key': KEYS.INTERNAL_ADMIN_KEYS } })).statusCode).toBe(404);
  });

  it.each([
    ['no key', {}],
    ['a device key', { authorization: basic(KEYS.INTERNAL_DEVICE_KEYS) }],
    ['the CRM key', { 'x-api-key': KEYS.OPERATOR_API_KEYS }],
  ])('refuses %s with 401 and a Basic challenge', async (_name, headers) => {
    const response = await fetch(`${base}/admin/queues`, { headers: headers as Record<string, string> });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
  });
});

describe('METRICS_PORT taken', () => {
  let h: Harness;
  let blocker: net.Server;

  beforeAll(async () => {
    blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    h = await Harness.open(PRODUCTION);
  });
  afterAll(async () => {
    await h.close();
    await new Promise((resolve) => blocker.close(resolve));
  });

  it('stops the start with one line that names METRICS_PORT', async () => {
    const port = (blocker.address() as AddressInfo).port;
    const start = listenOperations(h.operations!, { ...h.stores.config, HOST: '127.0.0.1', METRICS_PORT: port });
    await expect(start).rejects.toThrow(MetricsPortError);
    await expect(start).rejects.toThrow(`METRICS_PORT ${port} is already in use: set METRICS_PORT to a free port (0 takes any)`);
  });
});
