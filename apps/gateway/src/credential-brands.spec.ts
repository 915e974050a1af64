import Fastify, { type FastifyInstance } from 'fastify';
import { loadGatewayConfig, type Env } from '@operator/config';
import { issueAccessToken } from './access-token';
import { requireInternalKey } from './auth';
import { decorateBrands } from './brands';
import { requireCrmAuth } from './crm-auth';
import { oauthTokenRoutes } from './routes/oauth-token';

const SIGNING_KEY = 'signing-key-brands-0123456789abcdefgh';
const ENV: Env = {
  OPERATOR_API_KEYS: 'k-all,k-one@1,k-two@2+3',
  INTERNAL_DEVICE_KEYS: 'd-all,d-one@1',
  INTERNAL_ADMIN_KEYS: 'a-seven@7',
  CRM_AUTH: 'api-key,basic,oauth2',
  CRM_BASIC_USERS: 'u-one:password@1,u-all:password',
  CRM_OAUTH_CLIENTS: 'c-two:secret@2,c-all:secret',
  CRM_OAUTH_SIGNING_KEYS: SIGNING_KEY,
};

/** The CRM, device and admin scopes as the gateway guards them, each route answering the brands its request opens. */
async function appOf(env: Env): Promise<FastifyInstance> {
  const config = loadGatewayConfig(env);
  const app = Fastify();
  decorateBrands(app);
  const echo = async (request: { brands: unknown }) => ({ brands: request.brands });
  app.register(async (crm) => {
    requireCrmAuth(crm, config.operatorApiKeys, config.crmAuth);
    crm.get('/crm', echo);
  });
  app.register(oauthTokenRoutes, { auth: config.crmAuth, allowGet: false });
  app.register(async (devices) => {
    requireInternalKey(devices, config.internalKeys, 'devices');
    devices.get('/devices', echo);
  });
  app.register(async (admin) => {
    requireInternalKey(admin, config.internalKeys, 'admin');
    admin.get('/admin', echo);
  });
  app.get('/open', echo);
  await app.ready();
  return app;
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

describe('the brands a credential opens', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await appOf(ENV);
  });
  afterAll(() => app.close());

  const brandsAt = async (url: string, headers: Record<string, string>) => {
    const response = await app.inject({ method: 'GET', url, headers });
    return { status: response.statusCode, brands: response.json().brands };
  };
  const tokenOf = async (id: string, secret: string) =>
    (await app.inject({ method: 'POST', url: '/oauth/token', headers: { authorization: basic(id, secret), 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=client_credentials' })).json()
      .access_token as string;

  it('takes them from the CRM key, user or client that admitted the request', async () => {
    expect(await brandsAt('/crm', { 'x-api-key': 'k-all' })).toEqual({ status: 200, brands: null });
    expect(await brandsAt('/crm', { 'x-api-key': 'k-one' })).toEqual({ status: 200, brands: ['1'] });
    expect(await brandsAt('/crm', { 'x-api-key': 'k-two' })).toEqual({ status: 200, brands: ['2', '3'] });
    expect(await brandsAt('/crm', { authorization: basic('u-one', 'password') })).toEqual({ status: 200, brands: ['1'] });
    expect(await brandsAt('/crm', { authorization: basic('u-all', 'password') })).toEqual({ status: 200, brands: null });
    expect(await brandsAt('/crm', { authorization: `Bearer ${await tokenOf('c-two', 'secret')}` })).toEqual({ status: 200, brands: ['2'] });
    expect(await brandsAt('/crm', { authorization: `Bearer ${await tokenOf('c-all', 'secret')}` })).toEqual({ status: 200, brands: null });
    // The key with its @brands is not a key.
    expect((await brandsAt('/crm', { 'x-api-key': 'k-one@1' })).status).toBe(401);
  });

  it('carries a bound client’s brands in its access token', async () => {
    const claims = JSON.parse(Buffer.from((await tokenOf('c-two', 'secret')).split('.')[1], 'base64url').toString('utf8'));
    expect(claims).toMatchObject({ sub: 'c-two', brands: ['2'] });
    expect(JSON.parse(Buffer.from((await tokenOf('c-all', 'secret')).split('.')[1], 'base64url').toString('utf8'))).not.toHaveProperty('brands');
  });

  it('keeps a token to the brands its client opens now, when the client was bound to fewer since', async () => {
    const narrowed = await appOf({ ...ENV, CRM_OAUTH_CLIENTS: 'c-two:secret@2,c-all:secret@5' });
    try {
      const wide = issueAccessToken(SIGNING_KEY, 'c-all', 600);
      const twoAndNine = issueAccessToken(SIGNING_KEY, 'c-two', 600, undefined, ['2', '9']);
      const bearer = async (token: string) => (await narrowed.inject({ method: 'GET', url: '/crm', headers: { authorization: `Bearer ${token}` } })).json().brands;
      expect(await bearer(wide)).toEqual(['5']);
      expect(await bearer(twoAndNine)).toEqual(['2']);
    } finally {
      await narrowed.close();
    }
  });

  it('takes them from the device or admin key on the internal routes', async () => {
    expect(await brandsAt('/devices', { 'x-api-key': 'd-one' })).toEqual({ status: 200, brands: ['1'] });
    expect(await brandsAt('/devices', { 'x-api-key': 'd-all' })).toEqual({ status: 200, brands: null });
    expect(await brandsAt('/devices', { 'x-api-key': 'a-seven' })).toEqual({ status: 200, brands: ['7'] });
    expect(await brandsAt('/admin', { 'x-api-key': 'a-seven' })).toEqual({ status: 200, brands: ['7'] });
    expect((await brandsAt('/admin', { 'x-api-key': 'd-one' })).status).toBe(403);
  });

  it('opens no brand on a route no guard admits to', async () => {
    expect(await brandsAt('/open', {})).toEqual({ status: 200, brands: [] });
  });
});
