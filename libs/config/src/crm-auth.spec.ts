import { loadGatewayConfig } from './config';
import { CRM_AUTH_METHODS, DEV_OAUTH_SIGNING_KEY } from './crm-auth';
import type { Env } from './env';
import { configErrorOf } from '@operator/testing';

const PRODUCTION = {
  NODE_ENV: 'production',
  TRACKING_SECRET: 'tracking-secret-3q9VwXk2LmZr7TbN5yHc',
  OPERATOR_API_KEYS: 'crm-key-Zq3VfN1xLw5Tb7Ry2Kp9Hs4M',
  INTERNAL_API_KEYS: 'backend-key-Pt4Ys9Fk2Hw6Nz1Rd8Gx',
};
/** Long enough everywhere; production also refuses it, as one character repeated. */
const SIGNING_KEY = 'k'.repeat(32);
const PRODUCTION_SIGNING_KEY = 'signing-key-Vb8Qm2Xr5Tn9Lw3Hc7Jd';
const STRONG_SECRET = 'secret-Rw7Kq2Zn9Xb4Vt6Hm1Lp3Gs8Ye';
const CLIENT = `crm:${STRONG_SECRET}`;

const problems = (env: Env) => configErrorOf(() => loadGatewayConfig(env)).problems;

describe('CRM_AUTH and its credentials', () => {
  it('takes the API key alone by default', () => {
    expect(loadGatewayConfig({}).crmAuth.methods).toEqual(['api-key']);
  });

  it('reads several methods, in any order and spacing', () => {
    const config = loadGatewayConfig({ CRM_AUTH: ' oauth2, api-key ,basic', CRM_BASIC_USERS: 'crm:pw', CRM_OAUTH_CLIENTS: 'client:secret' });
    expect(config.crmAuth.methods).toEqual(['api-key', 'basic', 'oauth2']);
  });

  it('refuses an unknown method, listing the valid ones', () => {
    expect(problems({ CRM_AUTH: 'api-key,jwt,Basic' })).toEqual(['CRM_AUTH has unknown "jwt", "Basic"; valid: api-key, basic, oauth2']);
    expect(CRM_AUTH_METHODS).toEqual(['api-key', 'basic', 'oauth2']);
  });

  it('refuses a list with no method in it', () => {
    expect(problems({ CRM_AUTH: ' , ' })).toEqual(['CRM_AUTH must name at least one of api-key, basic, oauth2']);
  });

  it('splits each pair at its first colon: a password may hold colons, a user name cannot', () => {
    const config = loadGatewayConfig({ CRM_AUTH: 'basic,oauth2', CRM_BASIC_USERS: 'crm:pa:ss, other:x', CRM_OAUTH_CLIENTS: 'client-1:s3cr:et' });
    expect(config.crmAuth.basicUsers).toEqual([
      { id: 'crm', secret: 'pa:ss', brands: null },
      { id: 'other', secret: 'x', brands: null },
    ]);
    expect(config.crmAuth.oauthClients).toEqual([{ id: 'client-1', secret: 's3cr:et', brands: null }]);
  });

  it('refuses a malformed pair, naming its place and never its text', () => {
    const found = problems({ CRM_AUTH: 'basic,oauth2', CRM_BASIC_USERS: 'crm:ok,hunter2,:nouser', CRM_OAUTH_CLIENTS: 'client:' });
    expect(found).toEqual([
      'CRM_BASIC_USERS: the 2nd entry is not id:secret with both parts non-empty',
      'CRM_BASIC_USERS: the 3rd entry is not id:secret with both parts non-empty',
      'CRM_OAUTH_CLIENTS: the 1st entry is not id:secret with both parts non-empty',
      'CRM_AUTH has oauth2, but CRM_OAUTH_CLIENTS names no client_id:client_secret',
    ]);
    expect(found.join(' ')).not.toMatch(/hunter2|nouser/);
  });

  it('binds a user or client to brands with @ after its secret; without one it opens every brand', () => {
    const config = loadGatewayConfig({ CRM_AUTH: 'basic,oauth2', CRM_BASIC_USERS: 'one:pw@1,all:p@ss', CRM_OAUTH_CLIENTS: 'c:s@1+2,c:t@2+1' });
    expect(config.crmAuth.basicUsers).toEqual([
      { id: 'one', secret: 'pw', brands: ['1'] },
      { id: 'all', secret: 'p@ss', brands: null },
    ]);
    expect(config.crmAuth.oauthClients.map((client) => client.brands)).toEqual([['1', '2'], ['1', '2']]);
  });

  it('refuses a malformed brand list, and one OAuth client with two sets of brands, never naming the secret', () => {
    const found = problems({ CRM_AUTH: 'basic,oauth2', CRM_BASIC_USERS: 'one:hunter2@', CRM_OAUTH_CLIENTS: 'c:s3cret@1,c:s3cret2@2,d:s3cret3@3' });
    expect(found).toEqual([
      'CRM_BASIC_USERS: the 1st entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)',
      'CRM_OAUTH_CLIENTS names client c with different brands; give each of its entries the same @brands',
      'CRM_AUTH has basic, but CRM_BASIC_USERS names no user:password',
    ]);
    expect(found.join(' ')).not.toMatch(/hunter2|s3cret/);
  });

  it.each([
    ['basic', 'CRM_AUTH has basic, but CRM_BASIC_USERS names no user:password'],
    ['oauth2', 'CRM_AUTH has oauth2, but CRM_OAUTH_CLIENTS names no client_id:client_secret'],
  ])('refuses %s with nobody to admit, in every environment', (method, problem) => {
    expect(problems({ CRM_AUTH: method })).toEqual([problem]);
    expect(problems({ ...PRODUCTION, CRM_AUTH: method, CRM_OAUTH_SIGNING_KEYS: PRODUCTION_SIGNING_KEY })).toEqual([problem]);
  });

  it('reads the token lifetime and the signing keys, the first one first', () => {
    const config = loadGatewayConfig({ CRM_OAUTH_TOKEN_TTL: '600', CRM_OAUTH_SIGNING_KEYS: `${SIGNING_KEY}, ${'o'.repeat(40)}` });
    expect(config.crmAuth.tokenTtlSeconds).toBe(600);
    expect(config.crmAuth.signingKeys).toEqual([SIGNING_KEY, 'o'.repeat(40)]);
  });

  it.each(['59', '86401', '1.5'])('refuses a token lifetime of %s seconds', (ttl) => {
    expect(problems({ CRM_OAUTH_TOKEN_TTL: ttl })).toEqual([expect.stringMatching(/^CRM_OAUTH_TOKEN_TTL /)]);
  });

  it('refuses a signing key shorter than 32 characters, naming its place', () => {
    expect(problems({ CRM_OAUTH_SIGNING_KEYS: `${SIGNING_KEY},short-key` })).toEqual(['CRM_OAUTH_SIGNING_KEYS: the 2nd key is shorter than 32 characters']);
    expect(problems({ CRM_OAUTH_SIGNING_KEYS: ',' })).toEqual(['CRM_OAUTH_SIGNING_KEYS must name at least one key']);
  });

  it('refuses the development signing key in production when oauth2 is on, also listed among real ones', () => {
    const oauth = { ...PRODUCTION, CRM_AUTH: 'oauth2', CRM_OAUTH_CLIENTS: CLIENT };
    const refused = 'CRM_OAUTH_SIGNING_KEYS holds the development key, which anyone can sign with; set keys of your own when CRM_AUTH has oauth2 and NODE_ENV is production';
    expect(problems(oauth)).toEqual([refused]);
    expect(problems({ ...oauth, CRM_OAUTH_SIGNING_KEYS: `${PRODUCTION_SIGNING_KEY},${DEV_OAUTH_SIGNING_KEY}` })).toEqual([refused]);
    expect(loadGatewayConfig({ ...oauth, CRM_OAUTH_SIGNING_KEYS: PRODUCTION_SIGNING_KEY }).crmAuth.signingKeys).toEqual([PRODUCTION_SIGNING_KEY]);
    // Without oauth2 no token is signed, so the key is not asked for.
    expect(loadGatewayConfig(PRODUCTION).crmAuth.methods).toEqual(['api-key']);
  });

  it('refuses the development signing key whenever oauth2 is on outside development: in test too, and when NODE_ENV is unset it is development', () => {
    const oauth = { CRM_AUTH: 'api-key,oauth2', CRM_OAUTH_CLIENTS: CLIENT };
    expect(problems({ ...oauth, NODE_ENV: 'test' })).toEqual([
      'CRM_OAUTH_SIGNING_KEYS holds the development key, which anyone can sign with; set keys of your own when CRM_AUTH has oauth2 and NODE_ENV is test',
    ]);
    expect(loadGatewayConfig({ ...oauth, NODE_ENV: 'test', CRM_OAUTH_SIGNING_KEYS: SIGNING_KEY }).crmAuth.signingKeys).toEqual([SIGNING_KEY]);
    expect(loadGatewayConfig({ ...oauth, NODE_ENV: 'development' }).crmAuth.signingKeys).toEqual([DEV_OAUTH_SIGNING_KEY]);
    expect(loadGatewayConfig(oauth).crmAuth.signingKeys).toEqual([DEV_OAUTH_SIGNING_KEY]);
    expect(loadGatewayConfig({ NODE_ENV: 'test' }).crmAuth.signingKeys).toEqual([DEV_OAUTH_SIGNING_KEY]);
  });

  it('refuses in production a signing key of one character repeated, however long, naming its place and never the key', () => {
    const oauth = { ...PRODUCTION, CRM_AUTH: 'oauth2', CRM_OAUTH_CLIENTS: CLIENT };
    const found = problems({ ...oauth, CRM_OAUTH_SIGNING_KEYS: `${PRODUCTION_SIGNING_KEY},${'a'.repeat(32)},${'b'.repeat(64)}` });
    expect(found).toEqual(['CRM_OAUTH_SIGNING_KEYS: the 2nd key is one character repeated', 'CRM_OAUTH_SIGNING_KEYS: the 3rd key is one character repeated']);
    expect(found.join(' ')).not.toMatch(/aaaa|bbbb/);
    // Outside production only the length is asked for.
    expect(loadGatewayConfig({ CRM_OAUTH_SIGNING_KEYS: 'a'.repeat(32) }).crmAuth.signingKeys).toEqual(['a'.repeat(32)]);
  });

  it('refuses in production a weak Basic password or client secret, naming the variable and the entry, never the secret', () => {
    const found = problems({
      ...PRODUCTION,
      CRM_AUTH: 'basic,oauth2',
      CRM_BASIC_USERS: `crm:${STRONG_SECRET},ops:hunter2`,
      CRM_OAUTH_CLIENTS: `crm:${'s'.repeat(40)}`,
      CRM_OAUTH_SIGNING_KEYS: PRODUCTION_SIGNING_KEY,
    });
    expect(found).toEqual(['CRM_BASIC_USERS: the 2nd password is shorter than 32 characters', 'CRM_OAUTH_CLIENTS: the 1st secret is one character repeated']);
    expect(found.join(' ')).not.toMatch(/hunter2|ssss/);
    // The same credentials outside production: the developer's own.
    expect(loadGatewayConfig({ CRM_AUTH: 'basic', CRM_BASIC_USERS: 'crm:pw' }).crmAuth.basicUsers).toEqual([{ id: 'crm', secret: 'pw', brands: null }]);
  });

  it('keeps the raw variables out of the configuration', () => {
    const config = loadGatewayConfig({ CRM_AUTH: 'basic', CRM_BASIC_USERS: 'crm:pw' }) as Record<string, unknown>;
    for (const name of ['CRM_AUTH', 'CRM_BASIC_USERS', 'CRM_OAUTH_CLIENTS', 'CRM_OAUTH_TOKEN_TTL', 'CRM_OAUTH_SIGNING_KEYS']) expect(name in config).toBe(false);
  });
});
