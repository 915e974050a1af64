import { Type } from '@sinclair/typebox';
import { defaultMaxHeapUsedBytes, DEV_INTERNAL_KEY, DEV_OPERATOR_KEY, loadGatewayConfig, type InternalKeys } from './config';
import type { BoundKey } from './brands';
import { ConfigError, parseEnv, splitList, type Env } from './env';
import { loadBonusAppConfig } from './bonus';
import { loadDispatcherConfig } from './events';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import { configErrorOf } from '@operator/testing';
import { webpushAllowedOriginsOf } from './origins';

const PRODUCTION_TRACKING_SECRET = 'tracking-secret-3q9VwXk2LmZr7TbN5yHc';
// Keys as production takes them: 32+ characters, random.
const CRM_KEY = 'crm-key-Zq3VfN1xLw5Tb7Ry2Kp9Hs4M';
const CRM_KEY_2 = 'crm-key-Ue6Wd0Qa8Jg3Xn1Vc5Bm7Lr2';
const BACKEND_KEY = 'backend-key-Pt4Ys9Fk2Hw6Nz1Rd8Gx';

const configError = (env: Env) => configErrorOf(() => loadGatewayConfig(env));
/** The keys alone, for the lists that bind none to a brand. */
const keysOf = (bound: BoundKey[]) => bound.map(({ key }) => key);
const internalKeysOf = ({ devices, admin }: InternalKeys) => ({ devices: keysOf(devices), admin: keysOf(admin) });

const REAL_KEYS = { OPERATOR_API_KEYS: `${CRM_KEY},${CRM_KEY_2}`, INTERNAL_API_KEYS: BACKEND_KEY };

describe('loadGatewayConfig: defaults', () => {
  it('runs with an empty environment on development defaults', () => {
    const config = loadGatewayConfig({});
    expect(config).toEqual({
      NODE_ENV: 'development',
      LOG_LEVEL: 'info',
      SHUTDOWN_TIMEOUT_MS: 25000,
      ADMIN_UI: false,
      METRICS_PORT: 9464,
      DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/operator_api',
      DATABASE_READ_URL: 'postgresql://postgres@127.0.0.1:5432/operator_api',
      DATABASE_POOL_SIZE: 10,
      redis: { mode: 'standalone', address: { host: '127.0.0.1', port: 6379 }, db: 0, tls: false },
      QUEUE_PREFIX: 'operator',
      HOST: '0.0.0.0',
      PORT: 3000,
      CRM_HEADER_WORD: 'Service',
      BODY_LIMIT_BYTES: 5 * 1024 * 1024,
      BATCH_MAX_MESSAGES: 500,
      PUSH_JOB_MAX_MESSAGES: 500,
      PUSH_DEDUPE_DAYS: 2,
      PUSH_SINGLE_GROUP_WINDOW_MS: 2,
      PUSH_SINGLE_GROUP_MAX: 500,
      MAX_EVENT_LOOP_DELAY_MS: 1000,
      MAX_HEAP_USED_BYTES: defaultMaxHeapUsedBytes(),
      REQUEST_TIMEOUT_MS: 30000,
      PUSH_SEND_ATTEMPTS: 8,
      PUSH_SEND_BACKOFF_MS: 1000,
      TRACKING_SECRET: 'dev-tracking-secret',
      WEBHOOK_MAX_AGE: '24h',
      webhookMaxAgeMs: 86400000,
      BONUS_PLATFORM_URL: '',
      BONUS_PLATFORM_API_KEY: '',
      BONUS_PLATFORM_TIMEOUT_MS: 10000,
      BONUS_MAX_ATTEMPTS: 12,
      BONUS_BACKOFF_MS: 2000,
      BONUS_CONCURRENCY: 8,
      BONUS_DEFAULT_BRAND: 0,
      BONUS_POLL_MS: 200,
      EVENTS_ORIGIN: 'operator',
      EXCHANGE_RATES: '{}',
      bonus: { platformUrl: undefined, exchangeRates: {} },
      operatorApiKeys: [{ key: 'dev-operator-key', brands: null }],
      internalKeys: { devices: [{ key: 'dev-internal-key', brands: null }], admin: [{ key: 'dev-internal-key', brands: null }] },
      crmAuth: { methods: ['api-key'], basicUsers: [], oauthClients: [], tokenTtlSeconds: 7200, signingKeys: ['dev-oauth-signing-key-not-for-production'] },
      webpushAllowedOrigins: webpushAllowedOriginsOf({}).origins,
      vapidPublicKeys: { brands: new Map() },
      AUTH_FAILURE_LIMIT: 20,
      AUTH_FAILURE_WINDOW: '5m',
      AUTH_THROTTLE_EXEMPT: '',
      TRUST_PROXY: '',
      CRM_OAUTH_ALLOW_GET: false,
      TRACKING_TOKEN_TTL: '30d',
      edge: {
        authFailures: { limit: 20, windowMs: 300000 },
        authThrottleExempt: [],
        trustedProxies: [],
        oauthAllowGet: false,
        trackingTokenTtlMs: 30 * 86400000,
      },
    });
  });

  it('names the development keys', () => {
    expect(DEV_OPERATOR_KEY).toBe('dev-operator-key');
    expect(DEV_INTERNAL_KEY).toBe('dev-internal-key');
  });

  it('does not expose the raw key variables', () => {
    const config = loadGatewayConfig({}) as Record<string, unknown>;
    for (const name of ['OPERATOR_API_KEYS', 'INTERNAL_API_KEYS', 'INTERNAL_DEVICE_KEYS', 'INTERNAL_ADMIN_KEYS']) expect(name in config).toBe(false);
  });

  it('treats an empty variable as unset', () => {
    const config = loadGatewayConfig({ PORT: '', BATCH_MAX_MESSAGES: '', CRM_HEADER_WORD: '', OPERATOR_API_KEYS: '' });
    expect(config.PORT).toBe(3000);
    expect(config.BATCH_MAX_MESSAGES).toBe(500);
    expect(config.CRM_HEADER_WORD).toBe('Service');
    expect(keysOf(config.operatorApiKeys)).toEqual([DEV_OPERATOR_KEY]);
  });

  it('reads process.env when no environment is given', () => {
    const saved = process.env.BATCH_MAX_MESSAGES;
    process.env.BATCH_MAX_MESSAGES = '321';
    try {
      expect(loadGatewayConfig().BATCH_MAX_MESSAGES).toBe(321);
    } finally {
      if (saved === undefined) delete process.env.BATCH_MAX_MESSAGES;
      else process.env.BATCH_MAX_MESSAGES = saved;
    }
  });
});

describe('loadGatewayConfig: values from the environment', () => {
  it('parses numbers from strings', () => {
    const config = loadGatewayConfig({
      PORT: '8080',
      BATCH_MAX_MESSAGES: '250',
      DATABASE_POOL_SIZE: ' 4 ',
      BODY_LIMIT_BYTES: '2048',
      PUSH_JOB_MAX_MESSAGES: '50',
      MAX_EVENT_LOOP_DELAY_MS: '0',
      MAX_HEAP_USED_BYTES: '0',
      REQUEST_TIMEOUT_MS: '10000',
    });
    expect(config.PORT).toBe(8080);
    expect(config.BATCH_MAX_MESSAGES).toBe(250);
    expect(config.DATABASE_POOL_SIZE).toBe(4);
    expect(config.BODY_LIMIT_BYTES).toBe(2048);
    expect(config.PUSH_JOB_MAX_MESSAGES).toBe(50);
    expect(config.MAX_EVENT_LOOP_DELAY_MS).toBe(0);
    expect(config.MAX_HEAP_USED_BYTES).toBe(0);
    expect(config.REQUEST_TIMEOUT_MS).toBe(10000);
  });

  it('keeps strings as given', () => {
    const config = loadGatewayConfig({ HOST: '127.0.0.1', REDIS_URL: 'redis://cache:6380', QUEUE_PREFIX: 'op-test', CRM_HEADER_WORD: 'Acme', LOG_LEVEL: 'debug' });
    expect(config.HOST).toBe('127.0.0.1');
    expect(config.redis).toEqual({ mode: 'standalone', address: { host: 'cache', port: 6380 }, db: 0, tls: false });
    expect(config.QUEUE_PREFIX).toBe('op-test');
    expect(config.CRM_HEADER_WORD).toBe('Acme');
    expect(config.LOG_LEVEL).toBe('debug');
  });

  it('splits comma-separated keys, trimming and dropping empty entries', () => {
    const config = loadGatewayConfig({ OPERATOR_API_KEYS: 'a, b,,c', INTERNAL_API_KEYS: ' internal-1 ,internal-2, ' });
    expect(keysOf(config.operatorApiKeys)).toEqual(['a', 'b', 'c']);
    expect(internalKeysOf(config.internalKeys)).toEqual({ devices: ['internal-1', 'internal-2'], admin: ['internal-1', 'internal-2'] });
  });

  it('refuses a key list with no key in it', () => {
    const error = configError({ OPERATOR_API_KEYS: ' , ,', INTERNAL_API_KEYS: ',' });
    expect(error.problems).toEqual(['OPERATOR_API_KEYS must name at least one key', 'INTERNAL_API_KEYS must name at least one key']);
  });
});

describe('loadGatewayConfig: keys bound to brands', () => {
  it('reads KEY@7 and KEY@7+8 as keys that open those brands, and a key without @ as one that opens every brand', () => {
    const config = loadGatewayConfig({ OPERATOR_API_KEYS: 'all,one@1,two@1+02+1', INTERNAL_DEVICE_KEYS: 'device@7', INTERNAL_ADMIN_KEYS: 'ops@0,root' });
    expect(config.operatorApiKeys).toEqual([
      { key: 'all', brands: null },
      { key: 'one', brands: ['1'] },
      { key: 'two', brands: ['1', '2'] },
    ]);
    expect(config.internalKeys.devices).toEqual([{ key: 'device', brands: ['7'] }, { key: 'ops', brands: ['0'] }, { key: 'root', brands: null }]);
    expect(config.internalKeys.admin).toEqual([{ key: 'ops', brands: ['0'] }, { key: 'root', brands: null }]);
  });

  it('keeps an @ that is not followed by brand ids as part of the key', () => {
    expect(loadGatewayConfig({ OPERATOR_API_KEYS: 'p@ss,a@b@3' }).operatorApiKeys).toEqual([
      { key: 'p@ss', brands: null },
      { key: 'a@b', brands: ['3'] },
    ]);
  });

  it('refuses malformed brand lists at boot, naming the variable and the entry, never the key', () => {
    const error = configError({
      OPERATOR_API_KEYS: 'good,secret-one@',
      INTERNAL_DEVICE_KEYS: 'secret-two@7+',
      INTERNAL_ADMIN_KEYS: 'secret-three@+8,@9',
      INTERNAL_API_KEYS: `secret-four@${'9'.repeat(17)}`,
    });
    expect(error.problems).toEqual([
      'INTERNAL_DEVICE_KEYS: the 1st entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)',
      'INTERNAL_ADMIN_KEYS: the 1st entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)',
      'INTERNAL_ADMIN_KEYS: the 2nd entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)',
      'OPERATOR_API_KEYS: the 2nd entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)',
      'INTERNAL_API_KEYS: the 1st entry ends in @ but not in brand ids joined by + (KEY@7 or KEY@7+8)',
      'INTERNAL_API_KEYS must name at least one key',
    ]);
    expect(error.message).not.toMatch(/secret-/);
  });

  it('refuses the same key twice in a list, whatever its brands, and one key in two classes', () => {
    expect(configError({ OPERATOR_API_KEYS: 'k@1,k@2' }).problems).toEqual(['OPERATOR_API_KEYS names a key twice']);
    expect(configError({ OPERATOR_API_KEYS: 'k@1', INTERNAL_DEVICE_KEYS: 'k@2' }).problems).toEqual(['OPERATOR_API_KEYS and INTERNAL_DEVICE_KEYS must not share a key']);
  });
});

describe('loadGatewayConfig: internal keys by what they open', () => {
  it('opens everything with INTERNAL_API_KEYS, as before there were scoped keys', () => {
    expect(internalKeysOf(loadGatewayConfig({ INTERNAL_API_KEYS: 'backend' }).internalKeys)).toEqual({ devices: ['backend'], admin: ['backend'] });
  });

  it('opens the device routes alone with INTERNAL_DEVICE_KEYS, and every internal route with INTERNAL_ADMIN_KEYS', () => {
    const config = loadGatewayConfig({ INTERNAL_DEVICE_KEYS: 'app-1,app-2', INTERNAL_ADMIN_KEYS: 'ops', INTERNAL_API_KEYS: 'legacy' });
    expect(internalKeysOf(config.internalKeys)).toEqual({ devices: ['app-1', 'app-2', 'ops', 'legacy'], admin: ['ops', 'legacy'] });
  });

  it('falls back to the development key only while no internal key of any class is set', () => {
    expect(internalKeysOf(loadGatewayConfig({ INTERNAL_DEVICE_KEYS: 'app' }).internalKeys)).toEqual({ devices: ['app'], admin: [] });
    expect(internalKeysOf(loadGatewayConfig({ INTERNAL_ADMIN_KEYS: 'ops', INTERNAL_API_KEYS: '' }).internalKeys)).toEqual({ devices: ['ops'], admin: ['ops'] });
    expect(internalKeysOf(loadGatewayConfig({ INTERNAL_DEVICE_KEYS: ' , ' }).internalKeys)).toEqual({ devices: [DEV_INTERNAL_KEY], admin: [DEV_INTERNAL_KEY] });
  });

  it('takes scoped keys alone in production, and refuses the development key there', () => {
    const env = { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, OPERATOR_API_KEYS: CRM_KEY };
    const config = loadGatewayConfig({ ...env, INTERNAL_DEVICE_KEYS: CRM_KEY_2, INTERNAL_ADMIN_KEYS: BACKEND_KEY });
    expect(internalKeysOf(config.internalKeys)).toEqual({ devices: [CRM_KEY_2, BACKEND_KEY], admin: [BACKEND_KEY] });
    expect(configError(env).problems).toEqual(['INTERNAL_API_KEYS holds the development key; set real keys in production']);
  });

  it('refuses a key in two classes, naming both, for every pair', () => {
    const error = configError({ OPERATOR_API_KEYS: 'crm,a', INTERNAL_API_KEYS: 'b,c', INTERNAL_DEVICE_KEYS: 'a,d', INTERNAL_ADMIN_KEYS: 'd,c' });
    expect(error.problems).toEqual([
      'OPERATOR_API_KEYS and INTERNAL_DEVICE_KEYS must not share a key',
      'INTERNAL_API_KEYS and INTERNAL_ADMIN_KEYS must not share a key',
      'INTERNAL_DEVICE_KEYS and INTERNAL_ADMIN_KEYS must not share a key',
    ]);
  });

  it('refuses a weak device or admin key in production, naming its variable and place', () => {
    const env = { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, OPERATOR_API_KEYS: CRM_KEY };
    expect(configError({ ...env, INTERNAL_DEVICE_KEYS: `${CRM_KEY_2},app`, INTERNAL_ADMIN_KEYS: 'o'.repeat(32) }).problems).toEqual([
      'INTERNAL_DEVICE_KEYS: the 2nd key is shorter than 32 characters',
      'INTERNAL_ADMIN_KEYS: the 1st key is one character repeated',
    ]);
  });
});

describe('loadGatewayConfig: WEBPUSH_ALLOWED_ORIGINS', () => {
  const texts = (env: Env) => loadGatewayConfig(env).webpushAllowedOrigins.map((origin) => origin.text);

  it('allows the public browser push services by default, and when the variable is empty', () => {
    const defaults = ['https://fcm.googleapis.com', 'https://updates.push.services.mozilla.com', 'https://web.push.apple.com', 'https://*.notify.windows.com'];
    expect(texts({})).toEqual(defaults);
    expect(texts({ WEBPUSH_ALLOWED_ORIGINS: '' })).toEqual(defaults);
    expect('WEBPUSH_ALLOWED_ORIGINS' in loadGatewayConfig({})).toBe(false);
  });

  it('reads a list of its own, wildcards and a private address included', () => {
    const config = loadGatewayConfig({ WEBPUSH_ALLOWED_ORIGINS: ' https://push.example.com, https://*.push.example.net/ ,https://127.0.0.1:8443' });
    expect(config.webpushAllowedOrigins).toEqual([
      { text: 'https://push.example.com', host: 'push.example.com', wildcard: false, port: 443, privateAllowed: false },
      { text: 'https://*.push.example.net', host: 'push.example.net', wildcard: true, port: 443, privateAllowed: false },
      { text: 'https://127.0.0.1:8443', host: '127.0.0.1', wildcard: false, port: 8443, privateAllowed: true },
    ]);
  });

  it('lists every malformed entry with the other problems', () => {
    const error = configError({ PORT: 'abc', WEBPUSH_ALLOWED_ORIGINS: 'http://push.example.com,https://push.example.com/send,https://*.com' });
    expect(error.problems).toEqual([
      'PORT must be a number, got "abc"',
      'WEBPUSH_ALLOWED_ORIGINS: "http://push.example.com" is not https',
      'WEBPUSH_ALLOWED_ORIGINS: "https://push.example.com/send" has a path; give the origin only',
      'WEBPUSH_ALLOWED_ORIGINS: "https://*.com": a wildcard needs a domain of at least two labels after "*."',
    ]);
  });

  it('refuses a list of no origin', () => {
    expect(configError({ WEBPUSH_ALLOWED_ORIGINS: ' , ' }).problems).toEqual(['WEBPUSH_ALLOWED_ORIGINS: lists no origin']);
  });

  it('refuses an entry that is not https in production too', () => {
    const env = { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, ...REAL_KEYS };
    expect(configError({ ...env, WEBPUSH_ALLOWED_ORIGINS: 'http://127.0.0.1:8080' }).problems).toEqual(['WEBPUSH_ALLOWED_ORIGINS: "http://127.0.0.1:8080" is not https']);
    expect(texts({ ...env, WEBPUSH_ALLOWED_ORIGINS: 'https://10.0.0.5:8443' })).toEqual(['https://10.0.0.5:8443']);
  });
});

describe('loadGatewayConfig: problems', () => {
  it('reports every problem at once in one ConfigError', () => {
    const error = configError({ PORT: 'abc', BATCH_MAX_MESSAGES: '0' });
    expect(error).toBeInstanceOf(Error);
    expect(error.problems).toHaveLength(2);
    expect(error.problems[0]).toBe('PORT must be a number, got "abc"');
    expect(error.problems[1]).toMatch(/^BATCH_MAX_MESSAGES /);
    expect(error.message).toContain('PORT must be a number');
    expect(error.message).toContain('BATCH_MAX_MESSAGES');
    expect(error.message.startsWith('invalid configuration:')).toBe(true);
  });

  it('names each variable once', () => {
    const error = configError({ PORT: '70000', DATABASE_POOL_SIZE: '1.5', BODY_LIMIT_BYTES: '10', MAX_EVENT_LOOP_DELAY_MS: '-1' });
    expect(error.problems.map((problem) => problem.split(' ')[0])).toEqual(['DATABASE_POOL_SIZE', 'PORT', 'BODY_LIMIT_BYTES', 'MAX_EVENT_LOOP_DELAY_MS']);
  });

  it('refuses a port out of range', () => {
    expect(configError({ PORT: '65536' }).problems).toEqual([expect.stringMatching(/^PORT .*65535/)]);
    expect(loadGatewayConfig({ PORT: '65535' }).PORT).toBe(65535);
    expect(loadGatewayConfig({ PORT: '0' }).PORT).toBe(0);
  });

  it('refuses a fractional count', () => {
    expect(configError({ BATCH_MAX_MESSAGES: '2.5' }).problems).toEqual([expect.stringMatching(/^BATCH_MAX_MESSAGES .*integer/)]);
  });

  it.each(['Acme-Corp', 'Acme Corp', 'x_y', 'Acmé'])('refuses CRM_HEADER_WORD %p', (word) => {
    expect(configError({ CRM_HEADER_WORD: word }).problems).toEqual([expect.stringMatching(/^CRM_HEADER_WORD /)]);
  });

  it('refuses the same key for operator and internal use', () => {
    const error = configError({ OPERATOR_API_KEYS: 'crm-1,shared', INTERNAL_API_KEYS: 'shared' });
    expect(error.problems).toEqual(['OPERATOR_API_KEYS and INTERNAL_API_KEYS must not share a key']);
  });

  it('compares keys after trimming', () => {
    const error = configError({ OPERATOR_API_KEYS: 'crm-1, shared ', INTERNAL_API_KEYS: 'shared' });
    expect(error.problems).toEqual(['OPERATOR_API_KEYS and INTERNAL_API_KEYS must not share a key']);
  });
});

describe('loadGatewayConfig: production', () => {
  it('refuses the development tracking secret', () => {
    const error = configError({ NODE_ENV: 'production', OPERATOR_API_KEYS: CRM_KEY, INTERNAL_API_KEYS: BACKEND_KEY });
    expect(error.problems).toEqual(['TRACKING_SECRET holds the development secret; set a real one in production']);
  });

  it('lists a malformed variable and the development keys together', () => {
    const error = configError({ NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, PORT: 'abc' });
    expect(error.problems).toEqual([
      'PORT must be a number, got "abc"',
      'OPERATOR_API_KEYS holds the development key; set real keys in production',
      'INTERNAL_API_KEYS holds the development key; set real keys in production',
    ]);
  });

  it('refuses the development keys when the key variables are unset', () => {
    const error = configError({ NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET });
    expect(error.problems).toEqual([
      'OPERATOR_API_KEYS holds the development key; set real keys in production',
      'INTERNAL_API_KEYS holds the development key; set real keys in production',
    ]);
  });

  it('refuses the development keys when listed among real ones', () => {
    const error = configError({ NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, OPERATOR_API_KEYS: `${CRM_KEY}, ${DEV_OPERATOR_KEY}`, INTERNAL_API_KEYS: `${DEV_INTERNAL_KEY},${BACKEND_KEY}` });
    expect(error.problems).toEqual([
      'OPERATOR_API_KEYS holds the development key; set real keys in production',
      'INTERNAL_API_KEYS holds the development key; set real keys in production',
    ]);
  });

  it('refuses only the list that holds a development key', () => {
    const error = configError({ NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, OPERATOR_API_KEYS: CRM_KEY, INTERNAL_API_KEYS: DEV_INTERNAL_KEY });
    expect(error.problems).toEqual(['INTERNAL_API_KEYS holds the development key; set real keys in production']);
  });

  it('accepts real keys', () => {
    const config = loadGatewayConfig({ NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, ...REAL_KEYS });
    expect(config.NODE_ENV).toBe('production');
    expect(keysOf(config.operatorApiKeys)).toEqual([CRM_KEY, CRM_KEY_2]);
    expect(internalKeysOf(config.internalKeys)).toEqual({ devices: [BACKEND_KEY], admin: [BACKEND_KEY] });
  });

  it('allows the development keys outside production', () => {
    for (const NODE_ENV of ['development', 'test']) {
      expect(keysOf(loadGatewayConfig({ NODE_ENV }).operatorApiKeys)).toEqual([DEV_OPERATOR_KEY]);
    }
  });

  it('reports key problems together with other key problems', () => {
    const error = configError({ NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, OPERATOR_API_KEYS: DEV_OPERATOR_KEY, INTERNAL_API_KEYS: DEV_OPERATOR_KEY });
    expect(error.problems).toEqual([
      'OPERATOR_API_KEYS and INTERNAL_API_KEYS must not share a key',
      'OPERATOR_API_KEYS holds the development key; set real keys in production',
      'INTERNAL_API_KEYS: the 1st key is shorter than 32 characters',
    ]);
  });
});

describe('splitList', () => {
  it.each([
    ['a, b,,c', ['a', 'b', 'c']],
    ['single', ['single']],
    ['', []],
    [' , ,', []],
    ['  x  ', ['x']],
  ])('splits %p', (text, list) => {
    expect(splitList(text)).toEqual(list);
  });
});

describe('parseEnv', () => {
  const schema = Type.Object({
    FLAG: Type.Boolean({ default: true }),
    COUNT: Type.Integer({ default: 1, minimum: 1 }),
    RATIO: Type.Number({ default: 0.5 }),
    NAME: Type.String({ default: 'x' }),
  });

  it('applies defaults', () => {
    expect(parseEnv(schema, {})).toEqual({ FLAG: true, COUNT: 1, RATIO: 0.5, NAME: 'x' });
  });

  it.each([
    ['false', false],
    ['0', false],
    ['no', false],
    [' FALSE ', false],
    ['true', true],
    ['1', true],
    ['Yes', true],
  ])('reads boolean %p', (text, value) => {
    expect(parseEnv(schema, { FLAG: text }).FLAG).toBe(value);
  });

  it('reads fractional numbers for number fields', () => {
    expect(parseEnv(schema, { RATIO: '0.25' }).RATIO).toBe(0.25);
  });

  it('reports a bad boolean, a blank number and a non-number together', () => {
    try {
      parseEnv(schema, { FLAG: 'maybe', COUNT: '   ', RATIO: 'half' });
      throw new Error('expected a ConfigError');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toEqual([
        'FLAG must be true or false, got "maybe"',
        'COUNT must be a number, got "   "',
        'RATIO must be a number, got "half"',
      ]);
    }
  });

  it('ignores variables the schema does not name', () => {
    expect(parseEnv(schema, { OTHER: 'value' })).toEqual({ FLAG: true, COUNT: 1, RATIO: 0.5, NAME: 'x' });
  });
});

describe('NODE_ENV', () => {
  const loaders: [string, (env: Env) => unknown][] = [
    ['gateway', loadGatewayConfig],
    ['dispatcher', loadDispatcherConfig],
    ['bonus app', loadBonusAppConfig],
    ['fcm worker', (env) => loadPushWorkerConfig('fcm', env)],
  ];

  it.each(loaders)('is refused by the %s when it is not development, test or production, listed with the other problems', (_app, load) => {
    for (const NODE_ENV of ['prod', 'Production', 'staging', 'dev']) {
      const { problems } = configErrorOf(() => load({ NODE_ENV, METRICS_PORT: 'abc' }));
      expect(problems).toEqual(expect.arrayContaining([`NODE_ENV must be one of development, test, production, got "${NODE_ENV}"`, 'METRICS_PORT must be a number, got "abc"']));
    }
  });

  it.each(loaders)('is development when unset or empty, and takes development, test and production in the %s', (_app, load) => {
    expect(load({})).toMatchObject({ NODE_ENV: 'development' });
    expect(load({ NODE_ENV: '' })).toMatchObject({ NODE_ENV: 'development' });
    expect(load({ NODE_ENV: 'test' })).toMatchObject({ NODE_ENV: 'test' });
  });

  it('does not let a NODE_ENV of "prod" pass with the development keys', () => {
    const { problems } = configError({ NODE_ENV: 'prod', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET });
    expect(problems).toEqual(['NODE_ENV must be one of development, test, production, got "prod"']);
  });
});
