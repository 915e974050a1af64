import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { INTERNAL_KEY, OPERATOR_KEY } from '@operator/testing';
import { Harness } from './test/harness';

// Repeated failed authentications lock out the address they come from, and the Basic user or OAuth
// client they name: 429 with Retry-After on every authenticated route and on /oauth/token, the
// right credentials included, while it lasts. X-Forwarded-For names the client only when a proxy
// of TRUST_PROXY sends it.

const USER = 'crm-user';
const PASSWORD = 'crm-password';
const CLIENT = 'crm-client';
const SECRET = 'crm-client-secret';
const EVERY_METHOD = {
  CRM_AUTH: 'api-key,basic,oauth2',
  CRM_BASIC_USERS: `${USER}:${PASSWORD},other-user:other-password`,
  CRM_OAUTH_CLIENTS: `${CLIENT}:${SECRET},other-client:other-secret`,
  CRM_OAUTH_SIGNING_KEYS: 'throttle-spec-signing-key-0123456789abcdef',
};
const LIMIT = 5;
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

  function expectLockedOut(response: LightMyRequestResponse) {
    expect(response.statusCode).toBe(429);
    expect(response.json()).toEqual({ error: expect.stringMatching(/too many failed authentications/), code: response.statusCode });
    expect(Number(response.headers['retry-after'])).toBeGreaterThan(0);
  }

  /** `count` calls; answers their statuses. */
  async function statuses(count: number, request: (i: number) => Promise<LightMyRequestResponse>): Promise<number[]> {
    const answers: number[] = [];
    for (let i = 0; i < count; i++) answers.push((await request(i)).statusCode);
    return answers;
  }

  it('answers 25 wrong client secrets from one address with 429 and Retry-After from the 21st on (the default limit), and the right secret too', async () => {
    await open({ AUTH_FAILURE_LIMIT: '20' });
    const answers = await statuses(25, () => tokenRequest(CLIENT, 'wrong-secret'));
    expect(answers).toEqual([...Array(20).fill(401), ...Array(5).fill(429)]);

    const right = await tokenRequest(CLIENT, SECRET);
    expectLockedOut(right);
    expect(Number(right.headers['retry-after'])).toBeLessThanOrEqual(300);
    expect(right.json().access_token).toBeUndefined();
    // The client is locked out wherever it calls from; another client from another address is not.
    expectLockedOut(await tokenRequest(CLIENT, SECRET, CRM));
    expect((await tokenRequest('other-client', 'other-secret', CRM)).statusCode).toBe(200);
  });

  it('locks out a client whose secret is guessed from many addresses, in the body, the query or a Basic header', async () => {
    await open({ CRM_OAUTH_ALLOW_GET: 'true' });
    await statuses(LIMIT, (i) => tokenRequest(CLIENT, `guess-${i}`, `192.0.2.${i + 1}`));
    expectLockedOut(await tokenRequest(CLIENT, SECRET, CRM));
    expectLockedOut(await call({ method: 'GET', url: '/oauth/token', from: CRM, query: { grant_type: 'client_credentials', client_id: CLIENT, client_secret: SECRET } }));
    expectLockedOut(
      await call({ method: 'POST', url: '/oauth/token', from: CRM, headers: { authorization: basic(CLIENT, SECRET), 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=client_credentials' }),
    );
  });

  it.each([
    ['a wrong X-Api-Key', { 'x-api-key': 'wrong-key' }, { 'x-api-key': OPERATOR_KEY }],
    ['a wrong Basic password', { authorization: basic(USER, 'wrong-password') }, { authorization: basic('other-user', 'other-password') }],
    ['a garbage bearer token', { authorization: 'Bearer garbage' }, { 'x-api-key': OPERATOR_KEY }],
    ['the internal key', { 'x-api-key': INTERNAL_KEY }, { 'x-api-key': OPERATOR_KEY }],
  ])('locks the address out of the CRM endpoints after %s, the right credentials too', async (_name, wrong, right) => {
    await open();
    expect(await statuses(LIMIT + 2, () => bonusList(wrong))).toEqual([...Array(LIMIT).fill(401), 429, 429]);
    expectLockedOut(await bonusList(right));
    expect((await bonusList(right, CRM)).statusCode).toBe(200);
  });

  it('refuses a locked-out address a valid bearer token', async () => {
    await open();
    const token = (await tokenRequest(CLIENT, SECRET, ATTACKER)).json().access_token as string;
    await statuses(LIMIT, () => bonusList({ 'x-api-key': 'wrong-key' }));
    expectLockedOut(await bonusList({ authorization: `Bearer ${token}` }));
    expect((await bonusList({ authorization: `Bearer ${token}` }, CRM)).statusCode).toBe(200);
  });

  it('locks out a Basic user whose password is guessed from many addresses', async () => {
    await open();
    await statuses(LIMIT, (i) => bonusList({ authorization: basic(USER, `guess-${i}`) }, `192.0.2.${i + 1}`));
    expectLockedOut(await bonusList({ authorization: basic(USER, PASSWORD) }, CRM));
    expect((await bonusList({ authorization: basic('other-user', 'other-password') }, CRM)).statusCode).toBe(200);
  });

  it('spares, while a name is locked out, the addresses that have authenticated as it: the CRM keeps working', async () => {
    await open();
    expect((await bonusList({ authorization: basic(USER, PASSWORD) }, CRM)).statusCode).toBe(200);
    expect((await tokenRequest(CLIENT, SECRET, CRM)).statusCode).toBe(200);
    await statuses(LIMIT, (i) => bonusList({ authorization: basic(USER, `guess-${i}`) }, `192.0.2.${i + 1}`));
    await statuses(LIMIT, (i) => tokenRequest(CLIENT, `guess-${i}`, `192.0.2.${i + 101}`));
    expect((await bonusList({ authorization: basic(USER, PASSWORD) }, CRM)).statusCode).toBe(200);
    expect((await tokenRequest(CLIENT, SECRET, CRM)).statusCode).toBe(200);
    // Anyone else is refused the name, its right password too.
    expectLockedOut(await bonusList({ authorization: basic(USER, PASSWORD) }, '192.0.2.250'));
    expectLockedOut(await tokenRequest(CLIENT, SECRET, '192.0.2.250'));
    // And the CRM's own failures still count against its address.
    await statuses(LIMIT, () => bonusList({ authorization: basic(USER, 'typo') }, CRM));
    expectLockedOut(await bonusList({ authorization: basic(USER, PASSWORD) }, CRM));
  });

  it('does not count a user name that is not one of CRM_BASIC_USERS', async () => {
    await open();
    await statuses(LIMIT, (i) => bonusList({ authorization: basic(`nobody-${i % 2}`, 'x') }, `192.0.2.${i + 1}`));
    expect((await bonusList({ authorization: basic(USER, PASSWORD) }, CRM)).statusCode).toBe(200);
  });

  it('locks the address out of the internal API and the queue dashboard', async () => {
    await open({ ADMIN_UI: 'true' });
    const devices = (headers: Record<string, string>, from = ATTACKER) => call({ method: 'GET', url: '/v1/players/someone/devices', headers, from });
    expect(await statuses(LIMIT, () => devices({ 'x-api-key': 'wrong-key' }))).toEqual(Array(LIMIT).fill(401));
    expectLockedOut(await devices({ 'x-api-key': INTERNAL_KEY }));
    expect((await devices({ 'x-api-key': INTERNAL_KEY }, CRM)).statusCode).toBe(200);

    const dashboard = (headers: Record<string, string>, from: string) => call({ method: 'GET', url: '/admin/queues', headers, from });
    const staff = '192.0.2.200';
    expect(await statuses(LIMIT, () => dashboard({ authorization: basic('ops', 'wrong') }, staff))).toEqual(Array(LIMIT).fill(401));
    expectLockedOut(await dashboard({ authorization: basic('ops', INTERNAL_KEY) }, staff));
    expect((await dashboard({ authorization: basic('ops', INTERNAL_KEY) }, CRM)).statusCode).toBe(200);
  });

  it('never slows a client that succeeds, and a success does not buy more guesses', async () => {
    await open();
    expect(await statuses(LIMIT * 4, () => bonusList({ 'x-api-key': OPERATOR_KEY }, CRM))).toEqual(Array(LIMIT * 4).fill(200));
    await statuses(LIMIT - 1, () => bonusList({ 'x-api-key': 'wrong-key' }));
    expect((await bonusList({ 'x-api-key': OPERATOR_KEY })).statusCode).toBe(200);
    expect((await bonusList({ 'x-api-key': 'wrong-key' })).statusCode).toBe(401);
    expectLockedOut(await bonusList({ 'x-api-key': OPERATOR_KEY }));
  });

  it('leaves the routes that take no credentials open to a locked-out address', async () => {
    await open();
    await statuses(LIMIT, () => bonusList({ 'x-api-key': 'wrong-key' }));
    expect((await call({ method: 'GET', url: '/health/live' })).statusCode).toBe(200);
    const report = await call({ method: 'POST', url: '/v1/push/00000000-0000-7000-8000-000000000000/events', headers: { 'content-type': 'application/json' }, payload: '{"type":"opened","token":"x"}' });
    expect(report.statusCode).toBe(403);
  });

  it('counts an IPv6 client by its /64', async () => {
    await open();
    await statuses(LIMIT, (i) => bonusList({ 'x-api-key': 'wrong-key' }, `2001:db8:1:2::${i + 1}`));
    expectLockedOut(await bonusList({ 'x-api-key': OPERATOR_KEY }, '2001:db8:1:2:ffff::9'));
    expect((await bonusList({ 'x-api-key': OPERATOR_KEY }, '2001:db8:1:3::1')).statusCode).toBe(200);
  });

  it('with AUTH_FAILURE_LIMIT=0, never locks out', async () => {
    await open({ AUTH_FAILURE_LIMIT: '0' });
    expect(await statuses(50, () => tokenRequest(CLIENT, 'wrong-secret'))).toEqual(Array(50).fill(401));
    expect((await tokenRequest(CLIENT, SECRET)).statusCode).toBe(200);
  });

  describe('behind proxies', () => {
    const PROXY = '10.0.0.7';

    it('does not believe X-Forwarded-For from an address TRUST_PROXY does not list', async () => {
      await open({ TRUST_PROXY: '10.1.0.0/16' });
      const forged = await statuses(LIMIT + 1, (i) => bonusList({ 'x-api-key': 'wrong-key', 'x-forwarded-for': `192.0.2.${i + 1}` }));
      expect(forged).toEqual([...Array(LIMIT).fill(401), 429]);
      expectLockedOut(await bonusList({ 'x-api-key': OPERATOR_KEY, 'x-forwarded-for': '192.0.2.250' }));
    });

    it('does not believe X-Forwarded-For by default', async () => {
      await open();
      await statuses(LIMIT, (i) => bonusList({ 'x-api-key': 'wrong-key', 'x-forwarded-for': `192.0.2.${i + 1}` }, PROXY));
      expectLockedOut(await bonusList({ 'x-api-key': OPERATOR_KEY, 'x-forwarded-for': CRM }, PROXY));
    });

    it("believes a listed proxy's X-Forwarded-For: the client behind it is locked out, not the proxy's other clients", async () => {
      await open({ TRUST_PROXY: '10.0.0.0/24' });
      const via = (headers: Record<string, string>, client: string) => bonusList({ ...headers, 'x-forwarded-for': client }, PROXY);
      expect(await statuses(LIMIT, () => via({ 'x-api-key': 'wrong-key' }, ATTACKER))).toEqual(Array(LIMIT).fill(401));
      expectLockedOut(await via({ 'x-api-key': OPERATOR_KEY }, ATTACKER));
      expect((await via({ 'x-api-key': OPERATOR_KEY }, CRM)).statusCode).toBe(200);
      // A client cannot name another address in front of the proxy's: the proxy appends the real one.
      expectLockedOut(await via({ 'x-api-key': OPERATOR_KEY }, `${CRM}, ${ATTACKER}`));
    });
  });
});
