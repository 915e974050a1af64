import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { fcmToken, INTERNAL_KEY, OPERATOR_KEY, openTestStores, pushRequest, uniqueBrandId, uniqueName, type TestStores } from '@operator/testing';
import { issueAccessToken, keyId } from './access-token';
import { buildApp } from './app';
import { Harness } from './test/harness';

const NEW_KEY = 'signing-key-new-0123456789abcdefghijkl';
const OLD_KEY = 'signing-key-old-0123456789abcdefghijkl';
const USER = 'crm-user';
const PASSWORD = 'pass:with:colons';
const CLIENT = 'crm-client';
const SECRET = 'client-secret-123';
/** A client whose id and secret change when form-encoded. */
const ODD_CLIENT = 'odd client';
const ODD_SECRET = 'p+w/ %x';
const EVERY_METHOD = {
  CRM_AUTH: 'api-key,basic,oauth2',
  CRM_BASIC_USERS: `${USER}:${PASSWORD},other-user:other-password`,
  CRM_OAUTH_CLIENTS: `${CLIENT}:${SECRET},other-client:other-secret,${ODD_CLIENT}:${ODD_SECRET}`,
  CRM_OAUTH_SIGNING_KEYS: `${NEW_KEY},${OLD_KEY}`,
  CRM_OAUTH_TOKEN_TTL: '600',
  // The token endpoint's GET is tested beside its POST; it is off by default (see below).
  CRM_OAUTH_ALLOW_GET: 'true',
};

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
const bearer = (token: string) => `Bearer ${token}`;
const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
const headerOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString('utf8'));
/** POST /oauth/token with a form body and the client in an Authorization: Basic header. */
const basicTokenRequest = (h: Harness, authorization: string) =>
  h.app.inject({ method: 'POST', url: '/oauth/token', headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=client_credentials' });
const minutesAgo = (minutes: number) => () => Math.floor(Date.now() / 1000) - minutes * 60;

/** One CRM endpoint of each kind: push, polling, bonuses. */
function crmCalls(h: Harness, brand: number, player: string) {
  return [
    ['POST /channels/push/single', (headers: Record<string, string>) =>
      h.app.inject({ method: 'POST', url: '/channels/push/single', headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(pushRequest(brand, player)) })],
    ['GET /channels/push/status', (headers: Record<string, string>) =>
      h.app.inject({ method: 'GET', url: '/channels/push/status?push_id=00000000-0000-7000-8000-000000000000', headers })],
    ['GET /bonus/list', (headers: Record<string, string>) => h.app.inject({ method: 'GET', url: '/bonus/list', headers })],
  ] as const;
}

describe('CRM authentication with every method on', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open(EVERY_METHOD);
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
  });

  const tokenRequest = (method: 'GET' | 'POST', options: { query?: Record<string, string>; json?: unknown; form?: string; headers?: Record<string, string> }) =>
    h.app.inject({
      method,
      url: '/oauth/token',
      query: options.query,
      headers: {
        ...(options.json !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(options.form !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...options.headers,
      },
      payload: options.json !== undefined ? JSON.stringify(options.json) : options.form,
    });

  const credentials = { grant_type: 'client_credentials', client_id: CLIENT, client_secret: SECRET };

  async function newToken(): Promise<string> {
    const response = await tokenRequest('POST', { json: credentials });
    expect(response.statusCode).toBe(200);
    return response.json().access_token;
  }

  describe('the token endpoint', () => {
    it.each([
      ['POST with a JSON body', CLIENT, () => tokenRequest('POST', { json: credentials })],
      ['POST with a form body', CLIENT, () => tokenRequest('POST', { form: new URLSearchParams(credentials).toString() })],
      ['GET with query parameters', CLIENT, () => tokenRequest('GET', { query: credentials })],
      ['POST with the client in an Authorization: Basic header', CLIENT, () => tokenRequest('POST', { form: 'grant_type=client_credentials', headers: { authorization: basic(CLIENT, SECRET) } })],
      [
        'POST with the Basic header form-encoded (RFC 6749, 2.3.1)',
        ODD_CLIENT,
        () => tokenRequest('POST', { json: { grant_type: 'client_credentials' }, headers: { authorization: basic(encodeURIComponent(ODD_CLIENT), encodeURIComponent(ODD_SECRET)) } }),
      ],
    ])('answers a token for %s, not to be cached', async (_name, client, request) => {
      const before = Math.floor(Date.now() / 1000);
      const response = await request();
      expect(response.statusCode).toBe(200);
      expect(response.headers['cache-control']).toBe('no-store');
      const body = response.json();
      expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 600 });
      const claims = claimsOf(body.access_token);
      expect(claims.sub).toBe(client);
      expect(claims.exp - claims.iat).toBe(600);
      expect(claims.iat).toBeGreaterThanOrEqual(before);
      // The first key signs.
      expect(headerOf(body.access_token).kid).toBe(keyId(NEW_KEY));
    });

    it.each([
      ['a wrong secret', { ...credentials, client_secret: 'wrong-secret' }],
      ['an unknown client', { ...credentials, client_id: 'nobody' }],
      ["another client's secret", { ...credentials, client_secret: 'other-secret' }],
      ['no secret', { grant_type: 'client_credentials', client_id: CLIENT }],
      ['no client at all', { grant_type: 'client_credentials' }],
    ])('answers 401 invalid_client for %s', async (_name, body) => {
      for (const response of [await tokenRequest('POST', { json: body }), await tokenRequest('GET', { query: body })]) {
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: 'invalid_client', code: 401 });
        expect(response.headers['www-authenticate']).toMatch(/^Basic /);
        expect(response.headers['cache-control']).toBe('no-store');
      }
    });

    it('answers 401 invalid_client for a wrong secret in the Basic header', async () => {
      const response = await tokenRequest('POST', { form: 'grant_type=client_credentials', headers: { authorization: basic(CLIENT, 'wrong-secret') } });
      expect(response.statusCode).toBe(401);
      expect(response.json().error).toBe('invalid_client');
    });

    it.each(['password', 'authorization_code', 'CLIENT_CREDENTIALS', ''])('answers 400 unsupported_grant_type for grant_type %p', async (grant) => {
      const response = await tokenRequest('POST', { json: { ...credentials, grant_type: grant } });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: 'unsupported_grant_type', code: 400 });
    });

    it.each([
      ['no grant_type', () => tokenRequest('POST', { json: { client_id: CLIENT, client_secret: SECRET } })],
      ['a field that is not text', () => tokenRequest('POST', { json: { ...credentials, client_secret: 123 } })],
      ['a JSON array', () => tokenRequest('POST', { json: [credentials] })],
      ['a form field given twice', () => tokenRequest('POST', { form: `${new URLSearchParams(credentials)}&client_id=other-client` })],
      ['a query parameter given twice', () => h.app.inject({ method: 'GET', url: `/oauth/token?${new URLSearchParams(credentials)}&grant_type=client_credentials` })],
      ['the client both in the header and in the body', () => tokenRequest('POST', { json: credentials, headers: { authorization: basic(CLIENT, SECRET) } })],
    ])('answers 400 invalid_request for %s', async (_name, request) => {
      const response = await request();
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: 'invalid_request', code: 400 });
    });

    it('answers a body that is not JSON with 400 {error}', async () => {
      const response = await h.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '{"grant_type": ' });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(/not valid JSON/), code: response.statusCode });
    });

    it('answers a JSON body with a key given twice with 400 {error} naming it, and issues no token', async () => {
      for (const [payload, message] of [
        [`{"grant_type":"client_credentials","client_id":"other-client","client_secret":"other-secret","client_id":"${CLIENT}"}`, /^client_id is given twice$/],
        [`{"grant_type":"client_credentials","client_id":"${CLIENT}","client_secret":"${SECRET}","scope":{"a":1,"a":2}}`, /^scope\.a is given twice$/],
      ] as const) {
        const response = await h.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload });
        expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 400, body: { error: expect.stringMatching(message), code: 400 } });
      }
    });

    it('reads form bodies on the token endpoint only: the CRM endpoints still read every body as JSON', async () => {
      const response = await h.app.inject({
        method: 'POST',
        url: '/channels/push/single',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-api-key': OPERATOR_KEY },
        payload: 'activity=1',
      });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(/not valid JSON/), code: response.statusCode });
    });
  });

  describe('the CRM endpoints', () => {
    it('admit each method: X-Api-Key, Basic (a password with colons) and a bearer token of the token endpoint', async () => {
      const token = await newToken();
      const ways: Record<string, string>[] = [{ 'x-api-key': OPERATOR_KEY }, { authorization: basic(USER, PASSWORD) }, { authorization: basic('other-user', 'other-password') }, { authorization: bearer(token) }];
      for (const [name, call] of crmCalls(h, brand, player)) {
        for (const headers of ways) expect({ name, headers, status: (await call(headers)).statusCode }).toEqual({ name, headers, status: 200 });
      }
      expect(await h.messageRows(brand)).toHaveLength(ways.length);
    });

    it('admit a request by any method it passes, whatever else it carries', async () => {
      const [, , [, bonusList]] = crmCalls(h, brand, player);
      expect((await bonusList({ 'x-api-key': 'wrong-key', authorization: basic(USER, PASSWORD) })).statusCode).toBe(200);
      expect((await bonusList({ 'x-api-key': OPERATOR_KEY, authorization: 'Bearer garbage' })).statusCode).toBe(200);
    });

    const refusals: [string, () => Promise<Record<string, string>>][] = [
      ['no credentials', async () => ({})],
      ['a wrong password', async () => ({ authorization: basic(USER, 'wrong-password') })],
      ['the password cut at its first colon', async () => ({ authorization: basic(USER, 'pass') })],
      ["another user's password", async () => ({ authorization: basic(USER, 'other-password') })],
      ['an unknown user', async () => ({ authorization: basic('nobody', PASSWORD) })],
      ['Basic that is not base64 of user:password', async () => ({ authorization: 'Basic bm9jb2xvbg==' })],
      ['a garbage bearer token', async () => ({ authorization: 'Bearer garbage' })],
      ['the client secret as a bearer token', async () => ({ authorization: bearer(SECRET) })],
      ['an unknown scheme', async () => ({ authorization: `Digest ${SECRET}` })],
      ['a wrong API key', async () => ({ 'x-api-key': 'wrong-key' })],
      ['the internal key', async () => ({ 'x-api-key': INTERNAL_KEY })],
    ];

    it.each(refusals)('refuse %s with 401 {error}, naming the schemes they take', async (_name, headersOf) => {
      const headers = await headersOf();
      for (const [name, call] of crmCalls(h, brand, player)) {
        const response = await call(headers);
        expect({ name, status: response.statusCode, body: response.json() }).toEqual({ name, status: 401, body: { error: expect.any(String), code: 401 } });
        expect(response.headers['www-authenticate']).toMatch(/^Basic realm="crm", charset="UTF-8", Bearer realm="crm"/);
        expect(response.json().error).toContain('X-Api-Key, Authorization: Basic or Authorization: Bearer');
      }
      expect(await h.messageRows(brand)).toHaveLength(0);
    });

    it('refuse a token whose claims or signature were changed', async () => {
      const [header, claims, signature] = (await newToken()).split('.');
      const longer = Buffer.from(JSON.stringify({ sub: CLIENT, iat: 0, exp: 4_102_444_800 })).toString('base64url');
      const flipped = `${signature.slice(0, 5)}${signature[5] === 'A' ? 'B' : 'A'}${signature.slice(6)}`;
      for (const token of [`${header}.${longer}.${signature}`, `${header}.${claims}.${flipped}`, `${header}.${claims}`]) {
        const response = await crmCalls(h, brand, player)[0][1]({ authorization: bearer(token) });
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: expect.stringContaining('invalid bearer token'), code: response.statusCode });
        expect(response.headers['www-authenticate']).toContain('Bearer realm="crm", error="invalid_token"');
      }
      expect(await h.messageRows(brand)).toHaveLength(0);
    });

    it('refuse an expired token, saying so', async () => {
      const expired = issueAccessToken(NEW_KEY, CLIENT, 600, minutesAgo(11));
      const response = await crmCalls(h, brand, player)[2][1]({ authorization: bearer(expired) });
      expect(response.statusCode).toBe(401);
      expect(response.json().error).toMatch(/expired/);
      // The same token a minute younger is still valid.
      const fresh = issueAccessToken(NEW_KEY, CLIENT, 600, minutesAgo(9));
      expect((await crmCalls(h, brand, player)[2][1]({ authorization: bearer(fresh) })).statusCode).toBe(200);
    });

    it('admit a token signed with the old key while it is listed second', async () => {
      const old = issueAccessToken(OLD_KEY, CLIENT, 600);
      expect((await crmCalls(h, brand, player)[2][1]({ authorization: bearer(old) })).statusCode).toBe(200);
    });

    it('refuse a token signed with a key that is not listed, or issued to a client that is not', async () => {
      for (const token of [issueAccessToken('a-key-never-listed-0123456789abcdefgh', CLIENT, 600), issueAccessToken(NEW_KEY, 'removed-client', 600)]) {
        expect((await crmCalls(h, brand, player)[2][1]({ authorization: bearer(token) })).statusCode).toBe(401);
      }
    });
  });

  describe('the internal API /v1', () => {
    it('takes no CRM credential: API key, Basic or bearer token', async () => {
      const token = await newToken();
      const url = `/v1/players/${player}/devices`;
      for (const headers of [{ 'x-api-key': OPERATOR_KEY }, { authorization: basic(USER, PASSWORD) }, { authorization: bearer(token) }, { authorization: basic('any', INTERNAL_KEY) }]) {
        const response = await h.app.inject({ method: 'GET', url, headers });
        expect({ headers, status: response.statusCode, body: response.json() }).toEqual({ headers, status: 401, body: { error: expect.any(String), code: 401 } });
      }
      expect((await h.internal('GET', url)).statusCode).toBe(200);
    });
  });
});

describe('signing key rotation', () => {
  it('signs with the new first key, and refuses tokens of a key once it is removed', async () => {
    const before = await Harness.open({ ...EVERY_METHOD, CRM_OAUTH_SIGNING_KEYS: OLD_KEY });
    const during = await Harness.open(EVERY_METHOD);
    const after = await Harness.open({ ...EVERY_METHOD, CRM_OAUTH_SIGNING_KEYS: NEW_KEY });
    try {
      const tokenOf = async (h: Harness) =>
        (await basicTokenRequest(h, basic(CLIENT, SECRET))).json().access_token as string;
      const list = (h: Harness, token: string) => h.app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: bearer(token) } }).then((r) => r.statusCode);

      const old = await tokenOf(before);
      const rotated = await tokenOf(during);
      expect(headerOf(old).kid).toBe(keyId(OLD_KEY));
      expect(headerOf(rotated).kid).toBe(keyId(NEW_KEY));
      // Replicas share no state: a token of one is taken by every other with the key listed.
      expect([await list(before, old), await list(during, old), await list(during, rotated), await list(after, rotated)]).toEqual([200, 200, 200, 200]);
      expect([await list(after, old), await list(before, rotated)]).toEqual([401, 401]);
    } finally {
      await before.close();
      await during.close();
      await after.close();
    }
  });
});

describe('CRM_AUTH=basic only', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open({ CRM_AUTH: 'basic', CRM_BASIC_USERS: `${USER}:${PASSWORD}` });
  });
  afterAll(() => h.close());

  it('refuses the API key, and asks for Basic alone', async () => {
    const response = await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': OPERATOR_KEY } });
    expect(response.statusCode).toBe(401);
    expect(response.json()).toEqual({ error: 'X-Api-Key is not accepted here; send Authorization: Basic', code: response.statusCode });
    expect(response.headers['www-authenticate']).toBe('Basic realm="crm", charset="UTF-8"');
  });

  it('refuses a bearer token even if well signed', async () => {
    const token = issueAccessToken('dev-oauth-signing-key-not-for-production', CLIENT, 600);
    const response = await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: bearer(token) } });
    expect(response.statusCode).toBe(401);
  });

  it('admits Basic', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: basic(USER, PASSWORD) } })).statusCode).toBe(200);
  });

  it('has no token endpoint', async () => {
    const response = await h.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ grant_type: 'client_credentials' }) });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'no route for POST /oauth/token', code: response.statusCode });
  });
});

describe('GET /oauth/token by default', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open({ ...EVERY_METHOD, CRM_OAUTH_ALLOW_GET: '' });
  });
  afterAll(() => h.close());

  it('answers 405 with Allow: POST and {error}, even for the right client, issuing no token', async () => {
    const response = await h.app.inject({ method: 'GET', url: '/oauth/token', query: { grant_type: 'client_credentials', client_id: CLIENT, client_secret: SECRET } });
    expect(response.statusCode).toBe(405);
    expect(response.headers.allow).toBe('POST');
    expect(response.json()).toEqual({ error: expect.stringMatching(/^GET \/oauth\/token is turned off.*POST/), code: response.statusCode });
  });

  it('still answers POST', async () => {
    const response = await h.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ grant_type: 'client_credentials', client_id: CLIENT, client_secret: SECRET }) });
    expect(response.statusCode).toBe(200);
  });
});

describe('CRM_AUTH by default (api-key)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open();
  });
  afterAll(() => h.close());

  it('takes the API key alone: no Basic, no token endpoint', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': OPERATOR_KEY } })).statusCode).toBe(200);
    const refused = await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: basic('any', OPERATOR_KEY) } });
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ error: 'the Authorization scheme "basic" is not accepted here; send X-Api-Key', code: refused.statusCode });
    expect(refused.headers['www-authenticate']).toBeUndefined();
    expect((await h.app.inject({ method: 'GET', url: '/oauth/token', query: { grant_type: 'client_credentials' } })).statusCode).toBe(404);
  });
});

describe('CRM credentials in logs', () => {
  let stores: TestStores;
  let app: FastifyInstance;
  const output: string[] = [];

  beforeAll(async () => {
    stores = await openTestStores(EVERY_METHOD);
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

  it('never shows a password, client secret or token, not even from the query of GET /oauth/token', async () => {
    const got = await app.inject({ method: 'GET', url: `/oauth/token?grant_type=client_credentials&client_id=${CLIENT}&client_secret=${SECRET}` });
    const token: string = got.json().access_token;
    const encodedName = await app.inject({ method: 'GET', url: `/oauth/token?grant_type=client_credentials&client_id=${CLIENT}&client%5Fsecret=${SECRET}` });
    const responses = [
      got,
      encodedName,
      await app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `grant_type=client_credentials&client_id=${CLIENT}&client_secret=${SECRET}` }),
      await app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: bearer(token) } }),
      await app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: basic(USER, PASSWORD) } }),
      await app.inject({ method: 'GET', url: '/bonus/list', headers: { authorization: basic(USER, 'wrong-password-456') } }),
    ];
    expect(responses.map((response) => response.statusCode)).toEqual([200, 200, 200, 200, 200, 401]);
    const text = output.join('');
    expect(text).toContain('client_secret=[Redacted]');
    expect(text).toContain(`client_id=${CLIENT}`);
    for (const secret of [SECRET, PASSWORD, 'wrong-password-456', token, token.split('.')[2], basic(USER, PASSWORD).slice(6)]) expect(text).not.toContain(secret);
  });
});
