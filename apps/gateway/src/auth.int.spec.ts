import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import {
  fcmToken,
  INTERNAL_KEY,
  OPERATOR_KEY,
  openTestStores,
  pushRequest,
  ROTATED_OPERATOR_KEY,
  uniqueBrandId,
  uniqueName,
  type TestStores,
} from '@operator/testing';
import { buildApp, REDACTED_PATHS } from './app';
import { Harness } from './test/harness';

describe('API keys', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open();
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
  });

  /** A request with exactly these headers: no key unless one is given. */
  const send = (method: 'GET' | 'POST' | 'DELETE', url: string, headers: Record<string, string>, body?: unknown) =>
    h.app.inject({
      method,
      url,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      payload: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });

  describe('on the CRM endpoints', () => {
    const crmBody = (url: string) => (url.endsWith('/batch') ? [pushRequest(brand, player)] : pushRequest(brand, player));
    const endpoints = ['/channels/push/single', '/channels/push/batch'];

    const refused: [string, Record<string, string>][] = [
      ['no X-Api-Key', {}],
      ['a wrong key', { 'x-api-key': 'wrong-secret-123' }],
      ['an empty key', { 'x-api-key': '' }],
      ['the key in upper case', { 'x-api-key': OPERATOR_KEY.toUpperCase() }],
      ['the key with a trailing space', { 'x-api-key': `${OPERATOR_KEY} ` }],
      ['a prefix of the key', { 'x-api-key': OPERATOR_KEY.slice(0, -1) }],
      ['both keys joined', { 'x-api-key': `${OPERATOR_KEY},${ROTATED_OPERATOR_KEY}` }],
      ['the internal key', { 'x-api-key': INTERNAL_KEY }],
    ];

    describe.each(endpoints)('%s', (url) => {
      it.each(refused)('answers 401 {error} for %s and stores nothing', async (_name, headers) => {
        const response = await send('POST', url, headers, crmBody(url));
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
        expect(await h.messageRows(brand)).toHaveLength(0);
      });

      it.each([
        ['the current key', OPERATOR_KEY],
        ['the rotated second key', ROTATED_OPERATOR_KEY],
      ])('accepts %s', async (_name, key) => {
        const response = await send('POST', url, { 'x-api-key': key }, crmBody(url));
        expect(response.statusCode).toBe(200);
        expect(await h.messageRows(brand)).toHaveLength(1);
      });

      it('checks the key before the body: a wrong key with an invalid body answers 401', async () => {
        for (const body of ['{"activity": {', '', '"text"', { title: 42 }]) {
          const response = await send('POST', url, { 'x-api-key': 'wrong-secret-123' }, body);
          expect(response.statusCode).toBe(401);
          expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
        }
        const noKey = await send('POST', url, {}, '{"broken"');
        expect(noKey.statusCode).toBe(401);
      });
    });

    it('reads the header name in any case', async () => {
      const response = await send('POST', '/channels/push/single', { 'X-API-KEY': ROTATED_OPERATOR_KEY }, pushRequest(brand, player));
      expect(response.statusCode).toBe(200);
    });

    it('answers 401 for a request with the key in the query string instead of the header', async () => {
      const response = await send('POST', `/channels/push/single?api_key=${OPERATOR_KEY}`, {}, pushRequest(brand, player));
      expect(response.statusCode).toBe(401);
    });
  });

  describe('on the internal /v1 endpoints', () => {
    const requests: [string, 'GET' | 'POST' | 'DELETE', () => string, () => unknown][] = [
      ['GET devices', 'GET', () => `/v1/players/${player}/devices`, () => undefined],
      ['POST device', 'POST', () => '/v1/devices', () => ({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() })],
      ['DELETE device', 'DELETE', () => '/v1/devices/00000000-0000-7000-8000-000000000000', () => undefined],
    ];

    describe.each(requests)('%s', (_name, method, url, body) => {
      it.each([
        ['the CRM key', { 'x-api-key': OPERATOR_KEY }],
        ['the rotated CRM key', { 'x-api-key': ROTATED_OPERATOR_KEY }],
        ['no key', {}],
        ['a wrong key', { 'x-api-key': 'wrong-secret-123' }],
        ['an empty key', { 'x-api-key': '' }],
        ['the internal key in upper case', { 'x-api-key': INTERNAL_KEY.toUpperCase() }],
      ])('answers 401 {error} for %s', async (_keyName, headers) => {
        const response = await send(method, url(), headers, body());
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      });
    });

    it('works with the internal key', async () => {
      const token = fcmToken();
      const created = await send('POST', '/v1/devices', { 'x-api-key': INTERNAL_KEY }, { user_id: player, brand_id: brand, provider: 'fcm', token });
      expect(created.statusCode).toBe(201);

      const listed = await send('GET', `/v1/players/${player}/devices`, { 'x-api-key': INTERNAL_KEY });
      expect(listed.statusCode).toBe(200);
      expect(listed.json().devices.map((d: { token: string }) => d.token)).toContain(token);

      const deleted = await send('DELETE', `/v1/devices/${created.json().id}`, { 'x-api-key': INTERNAL_KEY });
      expect(deleted.statusCode).toBe(204);
    });

    it('refuses a CRM-keyed registration without storing the device', async () => {
      const token = fcmToken();
      const response = await send('POST', '/v1/devices', { 'x-api-key': OPERATOR_KEY }, { user_id: player, brand_id: brand, provider: 'fcm', token });
      expect(response.statusCode).toBe(401);
      expect(await h.stores.db.device.count({ where: { token } })).toBe(0);
    });

    it('checks the key before the body: a wrong key with an invalid body answers 401', async () => {
      for (const body of ['{"user_id": ', { provider: 'sms' }]) {
        const response = await send('POST', '/v1/devices', { 'x-api-key': OPERATOR_KEY }, body);
        expect(response.statusCode).toBe(401);
      }
    });
  });

  describe('health checks need no key', () => {
    it('answers /health/live with 200 {status: ok}', async () => {
      const response = await send('GET', '/health/live', {});
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ status: 'ok' });
    });

    it('answers /health/ready with 200 and postgres and redis up', async () => {
      const response = await send('GET', '/health/ready', {});
      expect(response.statusCode).toBe(200);
      // The Redis server's address is the operations port's to say (operations.int.spec.ts).
      expect(response.json()).toEqual({ status: 'ready', postgres: 'up', redis: 'up' });
    });

    it('still answers them when a wrong key is sent', async () => {
      expect((await send('GET', '/health/live', { 'x-api-key': 'wrong-secret-123' })).statusCode).toBe(200);
    });
  });
});

describe('keys in logs', () => {
  const SECRETS = [OPERATOR_KEY, ROTATED_OPERATOR_KEY, INTERNAL_KEY, 'wrong-secret-123'];
  let stores: TestStores;
  let app: FastifyInstance;
  let output: string[];

  const logText = () => output.join('');
  const logLines = () =>
    logText()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);

  beforeAll(async () => {
    stores = await openTestStores();
    output = [];
    const stream = new Writable({
      write(chunk, _encoding, callback) {
        output.push(chunk.toString());
        callback();
      },
    });
    app = buildApp(stores, { level: 'trace', stream });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await stores.close();
  });

  beforeEach(() => {
    output.length = 0;
  });

  const inject = (method: 'GET' | 'POST' | 'DELETE', url: string, key: string | undefined, payload?: string) =>
    app.inject({
      method,
      url,
      headers: { ...(key === undefined ? {} : { 'x-api-key': key }), ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      payload,
    });

  it('logs requests over real traffic without any key', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    const device = JSON.stringify({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
    const responses = [
      await inject('POST', '/v1/devices', INTERNAL_KEY, device),
      await inject('GET', `/v1/players/${player}/devices`, INTERNAL_KEY),
      await inject('POST', '/channels/push/single', OPERATOR_KEY, JSON.stringify(pushRequest(brand, player))),
      await inject('POST', '/channels/push/batch', ROTATED_OPERATOR_KEY, JSON.stringify([pushRequest(brand, player)])),
      await inject('POST', '/channels/push/single', 'wrong-secret-123', JSON.stringify(pushRequest(brand, player))),
      await inject('GET', `/v1/players/${player}/devices`, 'wrong-secret-123'),
      await inject('POST', '/channels/push/single', OPERATOR_KEY, '{"activity": {'),
      await inject('POST', '/v1/devices', INTERNAL_KEY, '{"user_id": '),
      await inject('POST', '/v1/devices', INTERNAL_KEY, JSON.stringify({ user_id: player, brand_id: 'x', provider: 'sms' })),
      await inject('DELETE', '/v1/devices/not-a-uuid', INTERNAL_KEY),
      await inject('GET', '/no/such/route', OPERATOR_KEY),
    ];
    expect(responses.map((r) => r.statusCode)).toEqual([201, 200, 200, 200, 401, 401, 400, 400, 400, 404, 404]);

    const text = logText();
    expect(text).not.toBe('');
    const lines = logLines();
    expect(lines.filter((line) => line.msg === 'incoming request')).toHaveLength(responses.length);
    expect(lines.filter((line) => line.msg === 'request completed')).toHaveLength(responses.length);
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'incoming request', req: expect.objectContaining({ method: 'POST', url: '/channels/push/single' }) }));
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'request completed', res: { statusCode: 401 } }));
    for (const secret of SECRETS) expect(text).not.toContain(secret);
  });

  it('redacts the x-api-key header path', () => {
    expect(REDACTED_PATHS).toContain('req.headers["x-api-key"]');
  });

  it("censors req.headers['x-api-key'] with the app's redaction when a request with headers is logged", () => {
    // Fastify's own req serializer keeps only method, url, host and addresses; this child logger
    // keeps the whole object, so the app's redact paths are what stands between a key and the log.
    app.log.child({}, { serializers: { req: (req: unknown) => req } }).info({ req: { headers: { 'x-api-key': 'secret-xyz', 'x-other': 'kept' } } }, 'probe');
    // Through the app logger itself the headers are not even serialized.
    app.log.info({ req: { headers: { 'x-api-key': 'secret-xyz' } } }, 'plain probe');

    const text = logText();
    expect(text).not.toContain('secret-xyz');
    const probe = logLines().find((line) => line.msg === 'probe');
    expect(probe).toMatchObject({ req: { headers: { 'x-api-key': '[Redacted]', 'x-other': 'kept' } } });
    expect(logLines().find((line) => line.msg === 'plain probe')).toBeDefined();
  });
});
