import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { INTERNAL_KEY, OPERATOR_KEY } from '@operator/testing';
import { Harness } from './test/harness';

// Failed authentications are counted per address, never per Basic user or OAuth client. Past
// AUTH_FAILURE_LIMIT an address's wrong credentials are answered 503 with Retry-After (the CRM
// retries a 5xx, drops a 4xx) instead of 401; right credentials are still checked and served from
// every address, the throttled one too. X-Forwarded-For names the client only when a proxy of
// TRUST_PROXY sends it.

const USER = 'crm';
const PASSWORD = 'crm-password';
const CLIENT = 'crm-client';
const SECRET = 'crm-client-secret';
const EVERY_METHOD = {
  CRM_AUTH: 'api-key,basic,oauth2',
  CRM_BASIC_USERS: `${USER}:${PASSWORD},other-user:other-password`,
  CRM_OAUTH_CLIENTS: `${CLIENT}:${SECRET},other-client:other-secret`,
  CRM_OAUTH_SIGNING_KEYS: 'throttle-spec-signing-key-0123456789abcdef',
};
const LIMIT = 20;
const ATTACKER = '203.0.113.66';
const CRM = '198.51.100.10';

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

describe('failed authentications', () => {
  let h: Harness;

  async function open(env: Record<string, string> = {}) {
    h = await Harness.open({ ...EVERY_METHOD, AUTH_FAILURE_LIMIT: String(LIMIT), ...env });
  }
  afterEach(() => h.close());

  const call = (options: InjectOptions & { from?: string }) => h.app.inject({ ...options, remoteAddress: options.from ?? ATTACKER });
  const tokenRequest = (clientId: string, secret: string, from = ATTACKER) =>
    call({ method: 'POST', url: '/oauth/token', from, headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }) });
  const bonusList = (headers: Record<string, string>, from = ATTACKER) => call({ method: 'GET', url: '/bonus/list', headers, from });

  function expectThrottled(response: LightMyRequestResponse) {
    expect(response.statusCode).toBe(503);
    expect(response.json()).toEqual({ error: expect.stringMatching(/too many failed authentications/), code: 503 });
    expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
    expect(response.headers['www-authenticate']).toBeUndefined();
  }

  /** `count` calls, one after the other; answers their statuses. */
  async function statuses(count: number, request: (i: number) => Promise<LightMyRequestResponse>): Promise<number[]> {
    const answers: number[] = [];
    for (let i = 0; i < count; i++) answers.push((await request(i)).statusCode);
    return answers;
  }

  const wrongPasswords = () => statuses(LIMIT, () => bonusList({ authorization: basic(USER, 'wrong-password') }));

  it('serves the right Basic password from another address after 20 wrong ones from one, and from the guessing address too', async () => {
    await open();
    expect(await wrongPasswords()).toEqual(Array(LIMIT).fill(401));
    expect((await bonusList({ authorization: basic(USER, PASSWORD) }, CRM)).statusCode).toBe(200);
    expect((await bonusList({ authorization: basic(USER, PASSWORD) })).statusCode).toBe(200);
  });

  it('answers the guesses past the 20th from that address 503 with Retry-After, for as long as they go on', async () => {
    await open();
    await wrongPasswords();
    for (let i = 0; i < 3; i++) expectThrottled(await bonusList({ authorization: basic(USER, `guess-${i}`) }));
    expectThrottled(await bonusList({ 'x-api-key': 'garbage' }));
    expectThrottled(await call({ method: 'GET', url: '/v1/players/someone/devices', headers: { 'x-api-key': 'garbage' } }));
    expectThrottled(await tokenRequest(CLIENT, 'wrong'));
    // A failure from another address is a plain 401.
    expect((await bonusList({ authorization: basic(USER, 'typo') }, CRM)).statusCode).toBe(401);
  });

  it('issues a token to the right client secret from another address after 20 wrong ones from one', async () => {
    await open();
    expect(await statuses(LIMIT, () => tokenRequest(CLIENT, 'wrong-secret'))).toEqual(Array(LIMIT).fill(401));
    expectThrottled(await tokenRequest(CLIENT, 'wrong-secret'));
    const right = await tokenRequest(CLIENT, SECRET, CRM);
    expect(right.statusCode).toBe(200);
    expect(typeof right.json().access_token).toBe('string');
    expect((await tokenRequest(CLIENT, SECRET)).statusCode).toBe(200);
  });

  it('serves the right key from an address that sent 20 garbage keys (a proxy the CRM shares)', async () => {
    await open();
    expect(await statuses(LIMIT, (i) => bonusList({ 'x-api-key': `garbage-${i}` }))).toEqual(Array(LIMIT).fill(401));
    expect((await bonusList({ 'x-api-key': OPERATOR_KEY })).statusCode).toBe(200);
    expect((await call({ method: 'POST', url: '/bonus/credit/funds', headers: { 'x-api-key': OPERATOR_KEY, 'content-type': 'application/json' }, payload: '{}' })).statusCode).toBe(400);
  });

  it('serves the new key at once after 25 requests in flight on a retired one', async () => {
    await open({ OPERATOR_API_KEYS: OPERATOR_KEY });
    const retired = await Promise.all(Array.from({ length: 25 }, () => bonusList({ 'x-api-key': 'retired-key-of-the-crm' }, CRM)));
    const answered = retired.map((response) => response.statusCode).sort();
    expect(answered).toEqual([...Array(LIMIT).fill(401), ...Array(25 - LIMIT).fill(503)]);
    retired.filter((response) => response.statusCode === 503).forEach(expectThrottled);
    expect((await bonusList({ 'x-api-key': OPERATOR_KEY }, CRM)).statusCode).toBe(200);
  });

  it('never counts an address of AUTH_THROTTLE_EXEMPT', async () => {
    await open({ AUTH_THROTTLE_EXEMPT: '198.51.100.0/24,2001:db8::/32' });
    expect(await statuses(LIMIT + 5, () => bonusList({ 'x-api-key': 'retired' }, CRM))).toEqual(Array(LIMIT + 5).fill(401));
    expect(await statuses(LIMIT + 5, () => bonusList({ 'x-api-key': 'retired' }, '2001:db8:5::1'))).toEqual(Array(LIMIT + 5).fill(401));
    // Others still are.
    await statuses(LIMIT, () => bonusList({ 'x-api-key': 'garbage' }));
    expectThrottled(await bonusList({ 'x-api-key': 'garbage' }));
  });

  it('counts an IPv6 client by its /64', async () => {
    await open();
    await statuses(LIMIT, (i) => bonusList({ 'x-api-key': 'wrong-key' }, `2001:db8:1:2::${i + 1}`));
    expectThrottled(await bonusList({ 'x-api-key': 'wrong-key' }, '2001:db8:1:2:ffff::9'));
    expect((await bonusList({ 'x-api-key': 'wrong-key' }, '2001:db8:1:3::1')).statusCode).toBe(401);
  });

  it('counts the internal key on a CRM route as a failure, and leaves the open routes open', async () => {
    await open();
    await statuses(LIMIT, () => bonusList({ 'x-api-key': INTERNAL_KEY }));
    expectThrottled(await bonusList({ 'x-api-key': INTERNAL_KEY }));
    expect((await call({ method: 'GET', url: '/health/live' })).statusCode).toBe(200);
    const report = await call({ method: 'POST', url: '/v1/push/00000000-0000-7000-8000-000000000000/events', headers: { 'content-type': 'application/json' }, payload: '{"type":"opened","token":"x"}' });
    expect(report.statusCode).toBe(403);
  });

  it('with AUTH_FAILURE_LIMIT=0, never throttles', async () => {
    await open({ AUTH_FAILURE_LIMIT: '0' });
    expect(await statuses(50, () => tokenRequest(CLIENT, 'wrong-secret'))).toEqual(Array(50).fill(401));
  });

  describe('behind proxies', () => {
    const PROXY = '10.0.0.7';

    it('does not believe X-Forwarded-For from an address TRUST_PROXY does not list: the connection is counted', async () => {
      await open({ TRUST_PROXY: '10.1.0.0/16' });
      await statuses(LIMIT, (i) => bonusList({ 'x-api-key': 'wrong-key', 'x-forwarded-for': `192.0.2.${i + 1}` }));
      expectThrottled(await bonusList({ 'x-api-key': 'wrong-key', 'x-forwarded-for': '192.0.2.250' }));
      expect((await bonusList({ 'x-api-key': OPERATOR_KEY, 'x-forwarded-for': '192.0.2.250' })).statusCode).toBe(200);
    });

    it("believes a listed proxy's X-Forwarded-For: the client behind it is throttled, not the proxy's other clients", async () => {
      await open({ TRUST_PROXY: '10.0.0.0/24' });
      const via = (headers: Record<string, string>, client: string) => bonusList({ ...headers, 'x-forwarded-for': client }, PROXY);
      await statuses(LIMIT, () => via({ 'x-api-key': 'wrong-key' }, ATTACKER));
      expectThrottled(await via({ 'x-api-key': 'wrong-key' }, ATTACKER));
      expect((await via({ 'x-api-key': 'wrong-key' }, CRM)).statusCode).toBe(401);
      // A client cannot name another address in front of the proxy's: the proxy appends the real one.
      expectThrottled(await via({ 'x-api-key': 'wrong-key' }, `${CRM}, ${ATTACKER}`));
    });
  });

  it('says in the OpenAPI document that a route behind credentials answers 503 with Retry-After, and never 429', async () => {
    await open({ NODE_ENV: 'development' });
    const document = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const list = document.paths['/bonus/list'].get.responses;
    expect(Object.keys(list)).not.toContain('429');
    expect(list['503'].description).toMatch(/AUTH_FAILURE_LIMIT/);
    expect(list['503'].headers['Retry-After']).toBeDefined();
  });
});

describe('failed authentications over real connections from loopback addresses', () => {
  let h: Harness;
  let port: number;

  beforeAll(async () => {
    h = await Harness.open({ ...EVERY_METHOD, AUTH_FAILURE_LIMIT: String(LIMIT) });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.app.server.address() as AddressInfo).port;
  });
  afterAll(() => h.close());

  function get(path: string, headers: Record<string, string>, localAddress: string): Promise<{ status: number; retryAfter?: string }> {
    return new Promise((resolve, reject) => {
      const request = http.request({ host: '127.0.0.1', port, path, headers, localAddress, agent: false }, (response) => {
        response.resume();
        response.on('end', () => resolve({ status: response.statusCode!, retryAfter: response.headers['retry-after'] }));
      });
      request.on('error', reject);
      request.end();
    });
  }

  it('serves the CRM from 127.0.0.3 with the right password after 20 wrong ones from 127.0.0.2', async () => {
    for (let i = 0; i < LIMIT; i++) expect((await get('/bonus/list', { authorization: basic(USER, `wrong-${i}`) }, '127.0.0.2')).status).toBe(401);
    const guess = await get('/bonus/list', { authorization: basic(USER, 'wrong') }, '127.0.0.2');
    expect(guess.status).toBe(503);
    expect(Number(guess.retryAfter)).toBeGreaterThan(0);
    expect((await get('/bonus/list', { authorization: basic(USER, PASSWORD) }, '127.0.0.3')).status).toBe(200);
    expect((await get('/bonus/list', { authorization: basic(USER, 'typo') }, '127.0.0.3')).status).toBe(401);
  });
});
