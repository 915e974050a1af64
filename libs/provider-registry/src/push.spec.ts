import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Env } from '@operator/config';
import type { ProviderName } from '@operator/contract';
import { loadPushWorkerConfig } from './config';
import { configErrorOf } from '@operator/testing';

const PRODUCTION_TRACKING_SECRET = 'tracking-secret-3q9VwXk2LmZr7TbN5yHc';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'push-config-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let fileCount = 0;
/** Writes a real temporary file and returns its path. */
function file(content: string, name = `file-${++fileCount}`): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}
const jsonFile = (value: unknown) => file(JSON.stringify(value), `file-${++fileCount}.json`);

const configError = (provider: ProviderName, env: Env) => configErrorOf(() => loadPushWorkerConfig(provider, env));

const SERVICE_ACCOUNT = {
  type: 'service_account',
  project_id: 'demo-project',
  client_email: 'push@demo-project.iam.gserviceaccount.com',
  private_key: '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n',
};
const P8_KEY = '-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMG\n-----END PRIVATE KEY-----\n';
const VAPID = {
  VAPID_PUBLIC_KEY: 'BPublicKeyBase64url',
  VAPID_PRIVATE_KEY: 'privateKeyBase64url',
  VAPID_SUBJECT: 'mailto:push@example.com',
};
function apnsEnv(): Env {
  return { APNS_KEY_FILE: file(P8_KEY, `key-${++fileCount}.p8`), APNS_KEY_ID: 'KEYID12345', APNS_TEAM_ID: 'TEAMID1234', APNS_TOPIC: 'com.example.app' };
}

describe('loadPushWorkerConfig: no credentials', () => {
  it.each(['fcm', 'apns', 'webpush', 'hms', 'onesignal'] as const)('%s runs on the sandbox with the defaults', (provider) => {
    const config = loadPushWorkerConfig(provider, {});
    expect(config.provider).toBe(provider);
    expect(config.sandbox).toBe(true);
    expect(config.credentials.default).toBeUndefined();
    expect(config.credentials.brands).toBeInstanceOf(Map);
    expect(config.credentials.brands.size).toBe(0);
    expect(config).toMatchObject({
      NODE_ENV: 'development',
      PUSH_WORKER_CONCURRENCY: 10,
      PUSH_WORKER_PARALLEL_MESSAGES: 100,
      PUSH_CLAIM_LEASE_MS: 60000,
      PUSH_SEND_ATTEMPTS: 8,
      PUSH_SEND_BACKOFF_MS: 1000,
      PUSH_RETRY_AFTER_MAX_MS: 300000,
      PUSH_RECORD_INTERVAL_MS: 100,
      PUSH_CREDENTIALS_FILE: '',
      APNS_PRODUCTION: false,
      APNS_PORT: 443,
      APNS_HOST: '',
    });
  });

  it('reads the worker variables as numbers', () => {
    const config = loadPushWorkerConfig('fcm', {
      PUSH_WORKER_CONCURRENCY: '3',
      PUSH_WORKER_PARALLEL_MESSAGES: '4',
      PUSH_CLAIM_LEASE_MS: '5000',
      PUSH_SEND_ATTEMPTS: '2',
      PUSH_SEND_BACKOFF_MS: '250',
    });
    expect(config).toMatchObject({
      PUSH_WORKER_CONCURRENCY: 3,
      PUSH_WORKER_PARALLEL_MESSAGES: 4,
      PUSH_CLAIM_LEASE_MS: 5000,
      PUSH_SEND_ATTEMPTS: 2,
      PUSH_SEND_BACKOFF_MS: 250,
    });
    expect(config.tuning).toMatchObject({ workerConcurrency: 3, parallelMessages: 4, claimLeaseMs: 5000, sendAttempts: 2, sendBackoffMs: 250 });
  });

  it('reads the provider variables of fcm and webpush, and the send timeout of apns', () => {
    expect(loadPushWorkerConfig('apns', { PUSH_SEND_TIMEOUT_MS: '3000' }).tuning).toMatchObject({ providerConcurrency: null, sendTimeoutMs: 3000 });
    expect(loadPushWorkerConfig('fcm', { PUSH_PROVIDER_CONCURRENCY: '100', PUSH_SEND_TIMEOUT_MS: '3000' }).tuning).toMatchObject({ providerConcurrency: 100, sendTimeoutMs: 3000 });
    expect(loadPushWorkerConfig('webpush', { PUSH_PROVIDER_CONCURRENCY: '4', PUSH_SEND_TIMEOUT_MS: '20000' }).tuning).toMatchObject({ providerConcurrency: 4, sendTimeoutMs: 20000 });
  });

  it('lets the apns worker cap its sends and connections, as the other workers do', () => {
    const config = loadPushWorkerConfig('apns', { PUSH_PROVIDER_CONCURRENCY: '100', PUSH_PROVIDER_CONNECTIONS: '2', PUSH_SEND_TIMEOUT_MS: '3000' });
    expect(config.tuning).toMatchObject({ providerConcurrency: 100, providerConnections: 2, sendTimeoutMs: 3000 });
    expect(configError('apns', { PUSH_SEND_TIMEOUT_MS: 'soon', PUSH_PROVIDER_CONNECTIONS: 'many' }).problems.sort()).toEqual([
      'PUSH_PROVIDER_CONNECTIONS must be a number, got "many"',
      'PUSH_SEND_TIMEOUT_MS must be a number, got "soon"',
    ]);
  });

  it('refuses a lease below one second', () => {
    expect(configError('fcm', { PUSH_CLAIM_LEASE_MS: '999' }).problems).toEqual([expect.stringContaining('PUSH_CLAIM_LEASE_MS')]);
  });

  it('reads the Retry-After cap, and refuses one below a second', () => {
    expect(loadPushWorkerConfig('webpush', { PUSH_RETRY_AFTER_MAX_MS: '60000' }).PUSH_RETRY_AFTER_MAX_MS).toBe(60000);
    expect(loadPushWorkerConfig('apns', { PUSH_RETRY_AFTER_MAX_MS: '1000' }).PUSH_RETRY_AFTER_MAX_MS).toBe(1000);
    expect(configError('fcm', { PUSH_RETRY_AFTER_MAX_MS: '999' }).problems).toEqual([expect.stringContaining('PUSH_RETRY_AFTER_MAX_MS')]);
  });

  it('reads the record interval, and refuses one of 0 or past a second', () => {
    expect(loadPushWorkerConfig('webpush', { PUSH_RECORD_INTERVAL_MS: '20' }).PUSH_RECORD_INTERVAL_MS).toBe(20);
    expect(configError('fcm', { PUSH_RECORD_INTERVAL_MS: '0' }).problems).toEqual([expect.stringContaining('PUSH_RECORD_INTERVAL_MS')]);
    expect(configError('fcm', { PUSH_RECORD_INTERVAL_MS: '1001' }).problems).toEqual([expect.stringContaining('PUSH_RECORD_INTERVAL_MS')]);
  });

  it('refuses a send timeout below 100 ms and a provider concurrency below 1', () => {
    expect(configError('fcm', { PUSH_SEND_TIMEOUT_MS: '99' }).problems).toEqual([expect.stringContaining('PUSH_SEND_TIMEOUT_MS')]);
    expect(configError('webpush', { PUSH_PROVIDER_CONCURRENCY: '0' }).problems).toEqual([expect.stringContaining('PUSH_PROVIDER_CONCURRENCY')]);
  });
});

describe('loadPushWorkerConfig: WEBPUSH_ALLOWED_ORIGINS', () => {
  it('gives the webpush worker the public browser push services by default', () => {
    const config = loadPushWorkerConfig('webpush', {});
    expect(config.webpushAllowedOrigins.map((origin) => origin.text)).toEqual([
      'https://fcm.googleapis.com',
      'https://updates.push.services.mozilla.com',
      'https://web.push.apple.com',
      'https://*.notify.windows.com',
    ]);
    expect('WEBPUSH_ALLOWED_ORIGINS' in config).toBe(false);
  });

  it('gives the webpush worker a list of its own', () => {
    const config = loadPushWorkerConfig('webpush', { WEBPUSH_ALLOWED_ORIGINS: 'https://127.0.0.1:9443,https://*.push.example.net' });
    expect(config.webpushAllowedOrigins).toEqual([
      { text: 'https://127.0.0.1:9443', host: '127.0.0.1', wildcard: false, port: 9443, privateAllowed: true },
      { text: 'https://*.push.example.net', host: 'push.example.net', wildcard: true, port: 443, privateAllowed: false },
    ]);
  });

  it('lists a malformed list with the other problems of the webpush worker', () => {
    expect(configError('webpush', { PUSH_CLAIM_LEASE_MS: 'soon', WEBPUSH_ALLOWED_ORIGINS: 'https://push.example.com,http://127.0.0.1:9443' }).problems).toEqual([
      'WEBPUSH_ALLOWED_ORIGINS: "http://127.0.0.1:9443" is not https',
      'PUSH_CLAIM_LEASE_MS must be a number, got "soon"',
    ]);
    expect(configError('webpush', { ...VAPID, WEBPUSH_ALLOWED_ORIGINS: 'https://u:p@push.example.com' }).problems).toEqual([
      'WEBPUSH_ALLOWED_ORIGINS: "https://u:p@push.example.com" has user info',
    ]);
  });

  it.each(['fcm', 'apns'] as const)('is not read by the %s worker, even broken', (provider) => {
    expect(loadPushWorkerConfig(provider, { WEBPUSH_ALLOWED_ORIGINS: 'http://nope' }).webpushAllowedOrigins).toEqual([]);
  });
});

describe('loadPushWorkerConfig: production', () => {
  it.each([
    ['fcm', 'FCM_SERVICE_ACCOUNT_FILE'],
    ['apns', 'APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC'],
    ['webpush', 'VAPID_PUBLIC_KEY, VAPID_PRIVATE_KEY, VAPID_SUBJECT'],
    ['hms', 'HMS_APP_ID, HMS_APP_SECRET'],
    ['onesignal', 'ONESIGNAL_APP_ID, ONESIGNAL_REST_API_KEY'],
  ] as const)('refuses the %s sandbox, naming %s and PUSH_CREDENTIALS_FILE', (provider, variables) => {
    const error = configError(provider, { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET });
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]).toContain(`no ${provider} credentials`);
    expect(error.problems[0]).toContain(variables);
    expect(error.problems[0]).toContain('PUSH_CREDENTIALS_FILE');
    expect(error.message).toContain(variables);
  });

  it('runs fcm with a service account', () => {
    const config = loadPushWorkerConfig('fcm', { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, FCM_SERVICE_ACCOUNT_FILE: jsonFile(SERVICE_ACCOUNT) });
    expect(config.sandbox).toBe(false);
    expect(config.NODE_ENV).toBe('production');
  });

  it('runs apns with a key', () => {
    expect(loadPushWorkerConfig('apns', { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, ...apnsEnv() }).sandbox).toBe(false);
  });

  it('runs webpush with VAPID keys', () => {
    expect(loadPushWorkerConfig('webpush', { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, ...VAPID }).sandbox).toBe(false);
  });

  it('runs with brand credentials only', () => {
    const credentials = jsonFile({ brands: { '3': { webpush: { publicKey: 'pub', privateKey: 'priv', subject: 'https://example.com' } } } });
    const config = loadPushWorkerConfig('webpush', { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, PUSH_CREDENTIALS_FILE: credentials });
    expect(config.sandbox).toBe(false);
    expect(config.credentials.default).toBeUndefined();
  });
});

describe('loadPushWorkerConfig: fcm default credentials', () => {
  it('reads the service account file', () => {
    const config = loadPushWorkerConfig('fcm', { FCM_SERVICE_ACCOUNT_FILE: jsonFile(SERVICE_ACCOUNT) });
    expect(config.sandbox).toBe(false);
    expect(config.credentials.default).toEqual({ serviceAccount: SERVICE_ACCOUNT });
    expect(config.credentials.brands.size).toBe(0);
  });

  it('names a missing file', () => {
    const path = join(dir, 'does-not-exist.json');
    const error = configError('fcm', { FCM_SERVICE_ACCOUNT_FILE: path });
    expect(error.problems).toEqual([expect.stringContaining(path)]);
    expect(error.problems[0]).toContain('cannot read');
    expect(error.problems[0]).toContain('ENOENT');
  });

  it('refuses a file that is not JSON', () => {
    const path = file('this is not json');
    expect(configError('fcm', { FCM_SERVICE_ACCOUNT_FILE: path }).problems).toEqual([`default fcm credentials: ${path} is not JSON`]);
  });

  it('refuses a service account without a private_key', () => {
    const { private_key: _, ...account } = SERVICE_ACCOUNT;
    const path = jsonFile(account);
    expect(configError('fcm', { FCM_SERVICE_ACCOUNT_FILE: path }).problems).toEqual([`default fcm credentials: ${path} has no private_key`]);
  });

  it('names every field the service account lacks', () => {
    const path = jsonFile({ project_id: 'demo-project', client_email: '' });
    expect(configError('fcm', { FCM_SERVICE_ACCOUNT_FILE: path }).problems).toEqual([
      `default fcm credentials: ${path} has no client_email`,
      `default fcm credentials: ${path} has no private_key`,
    ]);
  });
});

describe('loadPushWorkerConfig: apns default credentials', () => {
  it('reads the key file and the four variables', () => {
    const env = apnsEnv();
    const config = loadPushWorkerConfig('apns', env);
    expect(config.sandbox).toBe(false);
    expect(config.credentials.default).toEqual({
      key: P8_KEY,
      keyId: 'KEYID12345',
      teamId: 'TEAMID1234',
      topic: 'com.example.app',
      production: false,
      host: undefined,
      port: 443,
    });
  });

  it('carries APNS_PRODUCTION, APNS_HOST and APNS_PORT', () => {
    const config = loadPushWorkerConfig('apns', { ...apnsEnv(), APNS_PRODUCTION: 'true', APNS_HOST: 'apns-proxy.internal', APNS_PORT: '2197' });
    expect(config.APNS_PRODUCTION).toBe(true);
    expect(config.credentials.default).toMatchObject({ production: true, host: 'apns-proxy.internal', port: 2197 });
  });

  it('reports the variables missing from a partial set in one problem', () => {
    const { APNS_KEY_FILE, APNS_KEY_ID } = apnsEnv();
    const error = configError('apns', { APNS_KEY_FILE, APNS_KEY_ID });
    expect(error.problems).toEqual(['default apns credentials: set APNS_TEAM_ID, APNS_TOPIC as well']);
  });

  it('names an unreadable key file', () => {
    const path = join(dir, 'missing.p8');
    const error = configError('apns', { ...apnsEnv(), APNS_KEY_FILE: path });
    expect(error.problems).toEqual([expect.stringContaining(`cannot read ${path}`)]);
  });

  it('refuses an APNS_PRODUCTION that is not a boolean', () => {
    expect(configError('apns', { ...apnsEnv(), APNS_PRODUCTION: 'maybe' }).problems).toEqual([
      'APNS_PRODUCTION must be true or false, got "maybe"',
    ]);
  });
});

describe('loadPushWorkerConfig: webpush default credentials', () => {
  it('reads the three VAPID variables', () => {
    const config = loadPushWorkerConfig('webpush', VAPID);
    expect(config.sandbox).toBe(false);
    expect(config.credentials.default).toEqual({
      vapid: { publicKey: 'BPublicKeyBase64url', privateKey: 'privateKeyBase64url', subject: 'mailto:push@example.com' },
    });
  });

  it('accepts an https: subject', () => {
    expect(loadPushWorkerConfig('webpush', { ...VAPID, VAPID_SUBJECT: 'https://example.com/contact' }).credentials.default?.vapid.subject).toBe(
      'https://example.com/contact',
    );
  });

  it('refuses a subject that is neither mailto: nor https:', () => {
    const error = configError('webpush', { ...VAPID, VAPID_SUBJECT: 'push@example.com' });
    expect(error.problems).toEqual([expect.stringContaining('must start with mailto: or https:')]);
  });

  it('refuses an http: subject', () => {
    expect(configError('webpush', { ...VAPID, VAPID_SUBJECT: 'http://example.com' }).problems).toHaveLength(1);
  });

  it('reports the VAPID variables missing from a partial set', () => {
    expect(configError('webpush', { VAPID_PUBLIC_KEY: 'pub' }).problems).toEqual([
      'default webpush credentials: set VAPID_PRIVATE_KEY, VAPID_SUBJECT as well',
    ]);
  });
});

const ONESIGNAL_APP = '5eb5a37e-b458-11e3-ac11-000c2940e62c';

describe('loadPushWorkerConfig: hms and onesignal credentials', () => {
  it('reads the HMS app id and secret, and HMS_ENDPOINT', () => {
    const config = loadPushWorkerConfig('hms', { HMS_APP_ID: '104567890', HMS_APP_SECRET: 'hms-secret', HMS_ENDPOINT: 'https://127.0.0.1:8443' });
    expect(config.sandbox).toBe(false);
    expect(config.credentials.default).toEqual({ appId: '104567890', appSecret: 'hms-secret', endpoint: 'https://127.0.0.1:8443' });
  });

  it('reads the OneSignal app id and REST API key, and ONESIGNAL_ENDPOINT', () => {
    const config = loadPushWorkerConfig('onesignal', { ONESIGNAL_APP_ID: ONESIGNAL_APP, ONESIGNAL_REST_API_KEY: 'os-key', ONESIGNAL_ENDPOINT: 'https://onesignal.internal' });
    expect(config.credentials.default).toEqual({ appId: ONESIGNAL_APP, restApiKey: 'os-key', endpoint: 'https://onesignal.internal' });
  });

  it('names the variable missing from a partial set, and refuses a OneSignal app id that is not a UUID', () => {
    expect(configError('hms', { HMS_APP_ID: '104567890' }).problems).toEqual(['default hms credentials: set HMS_APP_SECRET as well']);
    expect(configError('onesignal', { ONESIGNAL_REST_API_KEY: 'k' }).problems).toEqual(['default onesignal credentials: set ONESIGNAL_APP_ID as well']);
    expect(configError('onesignal', { ONESIGNAL_APP_ID: 'my-app', ONESIGNAL_REST_API_KEY: 'k' }).problems).toEqual([
      'default onesignal credentials: the OneSignal app id must be a UUID',
    ]);
  });

  it('refuses an endpoint that is not an https origin', () => {
    expect(configError('hms', { HMS_APP_ID: '1', HMS_APP_SECRET: 's', HMS_ENDPOINT: 'http://127.0.0.1:8080' }).problems).toEqual([
      'HMS_ENDPOINT: http://127.0.0.1:8080 must be an https origin',
    ]);
    expect(configError('onesignal', { ONESIGNAL_APP_ID: ONESIGNAL_APP, ONESIGNAL_REST_API_KEY: 'k', ONESIGNAL_ENDPOINT: 'https://api.example.com/v1' }).problems).toEqual([
      'ONESIGNAL_ENDPOINT: https://api.example.com/v1 must be an origin only (https://host[:port])',
    ]);
  });

  it('gives each brand of PUSH_CREDENTIALS_FILE its own, naming the fields an entry lacks', () => {
    const path = jsonFile({
      brands: {
        '4': { hms: { appId: '4001', appSecret: 's4' }, onesignal: { appId: ONESIGNAL_APP, restApiKey: 'k4' } },
        '6': { hms: { appId: '6001' }, onesignal: { restApiKey: 'k6' } },
      },
    });
    expect(configError('hms', { PUSH_CREDENTIALS_FILE: path }).problems).toEqual(['PUSH_CREDENTIALS_FILE brand 6 hms: set appSecret as well']);
    expect(configError('onesignal', { PUSH_CREDENTIALS_FILE: path }).problems).toEqual(['PUSH_CREDENTIALS_FILE brand 6 onesignal: set appId as well']);
    const good = jsonFile({ brands: { '4': { hms: { appId: '4001', appSecret: 's4' }, onesignal: { appId: ONESIGNAL_APP, restApiKey: 'k4' } } } });
    expect(loadPushWorkerConfig('hms', { PUSH_CREDENTIALS_FILE: good }).credentials.brands.get('4')).toEqual({ appId: '4001', appSecret: 's4' });
    expect(loadPushWorkerConfig('onesignal', { PUSH_CREDENTIALS_FILE: good }).credentials.brands.get('4')).toEqual({ appId: ONESIGNAL_APP, restApiKey: 'k4' });
  });
});

describe('loadPushWorkerConfig: PUSH_CREDENTIALS_FILE', () => {
  it('reports a brand entry that is not an object', () => {
    const error = configError('fcm', { PUSH_CREDENTIALS_FILE: jsonFile({ brands: { '7': null } }) });
    expect(error.problems).toEqual(['PUSH_CREDENTIALS_FILE: brand 7 must be an object of provider credentials']);
  });

  function brandsFile(): string {
    return jsonFile({
      brands: {
        '7': {
          fcm: { serviceAccountFile: jsonFile(SERVICE_ACCOUNT) },
          webpush: { publicKey: 'pub-7', privateKey: 'priv-7', subject: 'mailto:brand7@example.com' },
        },
        '9': {
          apns: {
            keyFile: file(P8_KEY, `brand-9-${++fileCount}.p8`),
            keyId: 'KEY9',
            teamId: 'TEAM9',
            topic: 'com.example.nine',
            production: true,
            host: 'apns.internal',
            port: 8443,
          },
        },
      },
    });
  }

  it('gives webpush only the brands with webpush credentials', () => {
    const config = loadPushWorkerConfig('webpush', { PUSH_CREDENTIALS_FILE: brandsFile() });
    expect(config.sandbox).toBe(false);
    expect(config.credentials.default).toBeUndefined();
    expect([...config.credentials.brands.keys()]).toEqual(['7']);
    expect(config.credentials.brands.get('7')).toEqual({ vapid: { publicKey: 'pub-7', privateKey: 'priv-7', subject: 'mailto:brand7@example.com' } });
  });

  it('gives apns only the brands with apns credentials', () => {
    const config = loadPushWorkerConfig('apns', { PUSH_CREDENTIALS_FILE: brandsFile() });
    expect(config.sandbox).toBe(false);
    expect([...config.credentials.brands.keys()]).toEqual(['9']);
    expect(config.credentials.brands.get('9')).toEqual({
      key: P8_KEY,
      keyId: 'KEY9',
      teamId: 'TEAM9',
      topic: 'com.example.nine',
      production: true,
      host: 'apns.internal',
      port: 8443,
    });
  });

  it('gives fcm the brand service account', () => {
    const config = loadPushWorkerConfig('fcm', { PUSH_CREDENTIALS_FILE: brandsFile() });
    expect([...config.credentials.brands.keys()]).toEqual(['7']);
    expect(config.credentials.brands.get('7')).toEqual({ serviceAccount: SERVICE_ACCOUNT });
  });

  it('keeps the default next to the brands', () => {
    const config = loadPushWorkerConfig('webpush', { ...VAPID, PUSH_CREDENTIALS_FILE: brandsFile() });
    expect(config.credentials.default?.vapid.publicKey).toBe('BPublicKeyBase64url');
    expect(config.credentials.brands.get('7')?.vapid.publicKey).toBe('pub-7');
  });

  it('is a sandbox when no brand has credentials for the provider', () => {
    const config = loadPushWorkerConfig('fcm', { PUSH_CREDENTIALS_FILE: jsonFile({ brands: { '9': { apns: {} } } }) });
    expect(config.sandbox).toBe(true);
    expect(config.credentials.brands.size).toBe(0);
  });

  it('refuses a brand key that is not a brand id', () => {
    const path = jsonFile({ brands: { acme: { webpush: { publicKey: 'pub', privateKey: 'priv', subject: 'mailto:a@example.com' } } } });
    expect(configError('webpush', { PUSH_CREDENTIALS_FILE: path }).problems).toEqual(['PUSH_CREDENTIALS_FILE: brand "acme" is not a brand id']);
  });

  it('refuses a non-numeric brand key even when it has no credentials for this provider', () => {
    const path = jsonFile({ brands: { '7a': { apns: {} } } });
    expect(configError('webpush', { PUSH_CREDENTIALS_FILE: path }).problems).toEqual(['PUSH_CREDENTIALS_FILE: brand "7a" is not a brand id']);
  });

  it('names an unreadable file', () => {
    const path = join(dir, 'no-credentials.json');
    const error = configError('fcm', { PUSH_CREDENTIALS_FILE: path });
    expect(error.problems).toEqual([`PUSH_CREDENTIALS_FILE: cannot read ${path} (ENOENT)`]);
  });

  it('refuses a file that is not JSON', () => {
    const path = file('{"brands": {');
    expect(configError('fcm', { PUSH_CREDENTIALS_FILE: path }).problems).toEqual([`PUSH_CREDENTIALS_FILE: ${path} is not JSON`]);
  });

  it('names the fields a brand entry lacks', () => {
    const path = jsonFile({ brands: { '5': { apns: { keyId: 'K', teamId: 'T' } } } });
    expect(configError('apns', { PUSH_CREDENTIALS_FILE: path }).problems).toEqual(['PUSH_CREDENTIALS_FILE brand 5 apns: set keyFile, topic as well']);
  });

  it('reports several problems together in one ConfigError', () => {
    const missing = join(dir, 'missing-account.json');
    const path = jsonFile({
      brands: {
        acme: {},
        '1': { fcm: { serviceAccountFile: missing } },
        '2': { fcm: {} },
        '3': { fcm: { serviceAccountFile: file('not json') } },
      },
    });
    const error = configError('fcm', { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, PUSH_CREDENTIALS_FILE: path, FCM_SERVICE_ACCOUNT_FILE: jsonFile({ project_id: 'p' }) });
    // Brands come in object-key order: integer-like keys first, then the rest.
    expect(error.problems).toEqual([
      expect.stringMatching(/^default fcm credentials: .* has no client_email$/),
      expect.stringMatching(/^default fcm credentials: .* has no private_key$/),
      `PUSH_CREDENTIALS_FILE brand 1 fcm: cannot read ${missing} (ENOENT)`,
      'PUSH_CREDENTIALS_FILE brand 2 fcm: set serviceAccountFile as well',
      expect.stringMatching(/^PUSH_CREDENTIALS_FILE brand 3 fcm: .* is not JSON$/),
      'PUSH_CREDENTIALS_FILE: brand "acme" is not a brand id',
    ]);
    for (const problem of error.problems) expect(error.message).toContain(problem);
  });
});

describe("loadPushWorkerConfig: another provider's variables", () => {
  it('fcm ignores the VAPID variables', () => {
    const config = loadPushWorkerConfig('fcm', VAPID);
    expect(config.sandbox).toBe(true);
    expect(config.credentials.default).toBeUndefined();
  });

  it('fcm in production is not satisfied by VAPID variables', () => {
    expect(configError('fcm', { NODE_ENV: 'production', TRACKING_SECRET: PRODUCTION_TRACKING_SECRET, ...VAPID }).problems).toEqual([expect.stringContaining('no fcm credentials')]);
  });

  it('webpush ignores the APNs and FCM variables, even broken ones', () => {
    const config = loadPushWorkerConfig('webpush', { APNS_KEY_ID: 'only-this', FCM_SERVICE_ACCOUNT_FILE: join(dir, 'nowhere.json') });
    expect(config.sandbox).toBe(true);
  });

  it('apns ignores a broken VAPID subject', () => {
    expect(loadPushWorkerConfig('apns', { ...VAPID, VAPID_SUBJECT: 'nope', ...apnsEnv() }).sandbox).toBe(false);
  });
});

describe('PUSH_RETRY_AFTER_MAX_MS against the reconciler', () => {
  it('is refused above PUSH_RECONCILE_AFTER_MS, where a waiting delivery would look stranded', () => {
    expect(() => loadPushWorkerConfig('webpush', { PUSH_RETRY_AFTER_MAX_MS: '60000', PUSH_RECONCILE_AFTER_MS: '30000' })).toThrow(
      /PUSH_RETRY_AFTER_MAX_MS \(60000\) must not exceed PUSH_RECONCILE_AFTER_MS \(30000\)/,
    );
    expect(loadPushWorkerConfig('webpush', { PUSH_RETRY_AFTER_MAX_MS: '30000', PUSH_RECONCILE_AFTER_MS: '30000' }).PUSH_RETRY_AFTER_MAX_MS).toBe(30000);
  });
});

describe('loadPushWorkerConfig: compliance', () => {
  const KEY = 'operator-key-never-shown';

  it('has no gate unless COMPLIANCE_URL or a brand entry names an endpoint', () => {
    expect(loadPushWorkerConfig('fcm', {}).compliance).toBeUndefined();
  });

  it("carries COMPLIANCE_URL and each brand's compliance entry of PUSH_CREDENTIALS_FILE, for every provider", () => {
    const credentials = jsonFile({
      brands: {
        '7': { compliance: { url: 'https://brand7.example/crm', username: 'b7', password: 'p7' } },
        '9': { webpush: { publicKey: 'pub-9', privateKey: 'priv-9', subject: 'mailto:nine@example.com' }, compliance: {} },
      },
    });
    for (const provider of ['fcm', 'apns', 'webpush', 'hms', 'onesignal'] as const) {
      const config = loadPushWorkerConfig(provider, {
        PUSH_CREDENTIALS_FILE: credentials,
        COMPLIANCE_URL: 'https://operator.example',
        COMPLIANCE_API_KEY: KEY,
        COMPLIANCE_CACHE_TTL: '2m',
        COMPLIANCE_CONCURRENCY: '16',
      });
      expect(config.compliance).toMatchObject({ default: { url: 'https://operator.example', credential: { kind: 'api-key', header: 'X-Api-Key', key: KEY } }, cacheTtlMs: 120_000, concurrency: 16, maxWaitMs: 3_600_000 });
      expect(config.compliance?.brands).toEqual(
        new Map([
          ['7', { url: 'https://brand7.example/crm', credential: { kind: 'basic', username: 'b7', password: 'p7' } }],
          ['9', { url: 'https://operator.example', credential: { kind: 'api-key', header: 'X-Api-Key', key: KEY } }],
        ]),
      );
      // The settings hold the secret; the configuration's flat variables, which may be logged, do not.
      expect(config.COMPLIANCE_API_KEY).toBeUndefined();
    }
  });

  it('refuses a bad compliance setting with the others, by variable, never quoting a secret', () => {
    const error = configError('apns', {
      COMPLIANCE_URL: 'operator.example',
      COMPLIANCE_PASSWORD: KEY,
      COMPLIANCE_MAX_WAIT: 'forever',
      PUSH_CREDENTIALS_FILE: jsonFile({ brands: { '3': { compliance: { url: 'https://b3.example', apiKey: 42 } } } }),
    });
    expect(error.problems).toEqual([
      'compliance credentials: set COMPLIANCE_USERNAME and COMPLIANCE_PASSWORD together',
      'COMPLIANCE_URL must be an http:// or https:// URL',
      'PUSH_CREDENTIALS_FILE brand 3 compliance: apiKey must be a string',
      'COMPLIANCE_MAX_WAIT must be a duration (like 60s, 5m, 1h, or seconds), got "forever"',
    ]);
    expect(error.message).not.toContain(KEY);
  });
});
