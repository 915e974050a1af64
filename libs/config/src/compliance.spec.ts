import { ComplianceEnv, complianceSettingsOf, type ComplianceSettings } from './compliance';
import { ConfigError, parseEnv, type Env } from './env';

function settingsOf(env: Env, brands: Record<string, unknown> = {}): { settings: ComplianceSettings | undefined; problems: string[] } {
  const problems: string[] = [];
  const settings = complianceSettingsOf(parseEnv(ComplianceEnv, env), new Map(Object.entries(brands)), problems);
  return { settings, problems };
}

const SECRET = 'k3y-s3cr3t-never-shown';

describe('complianceSettingsOf', () => {
  it('is no gate without COMPLIANCE_URL or a brand entry', () => {
    expect(settingsOf({})).toEqual({ settings: undefined, problems: [] });
  });

  it('reads the defaults', () => {
    const { settings, problems } = settingsOf({ COMPLIANCE_URL: 'https://operator.example.com/crm/' });
    expect(problems).toEqual([]);
    expect(settings).toEqual({
      default: { url: 'https://operator.example.com/crm' },
      brands: new Map(),
      blockTypes: ['blocked'],
      consentDefault: 'opted-out',
      cacheTtlMs: 60_000,
      maxWaitMs: 3_600_000,
      concurrency: 128,
      timeoutMs: 5000,
    });
  });

  it('reads durations, knobs, extra block types and the consent default', () => {
    const { settings } = settingsOf({
      COMPLIANCE_URL: 'http://127.0.0.1:8080',
      COMPLIANCE_CACHE_TTL: '5m',
      COMPLIANCE_MAX_WAIT: '90',
      COMPLIANCE_CONCURRENCY: '8',
      COMPLIANCE_TIMEOUT_MS: '750',
      COMPLIANCE_BLOCK_TYPES: 'CoolOff, Fraud,,Excluded',
      COMPLIANCE_CONSENT_DEFAULT: 'opted-in',
    });
    expect(settings).toMatchObject({ cacheTtlMs: 300_000, maxWaitMs: 90_000, concurrency: 8, timeoutMs: 750, blockTypes: ['blocked', 'cooloff', 'fraud'], consentDefault: 'opted-in' });
    expect(settingsOf({ COMPLIANCE_URL: 'http://127.0.0.1:8080', COMPLIANCE_CACHE_TTL: '0' }).settings?.cacheTtlMs).toBe(0);
  });

  it('takes an API key with its header, or Basic credentials', () => {
    expect(settingsOf({ COMPLIANCE_URL: 'https://o.example', COMPLIANCE_API_KEY: SECRET }).settings?.default).toEqual({
      url: 'https://o.example',
      credential: { kind: 'api-key', header: 'X-Api-Key', key: SECRET },
    });
    expect(settingsOf({ COMPLIANCE_URL: 'https://o.example', COMPLIANCE_API_KEY: SECRET, COMPLIANCE_API_KEY_HEADER: 'X-Operator-Key' }).settings?.default?.credential).toEqual({
      kind: 'api-key',
      header: 'X-Operator-Key',
      key: SECRET,
    });
    expect(settingsOf({ COMPLIANCE_URL: 'https://o.example', COMPLIANCE_USERNAME: 'crm', COMPLIANCE_PASSWORD: SECRET }).settings?.default?.credential).toEqual({
      kind: 'basic',
      username: 'crm',
      password: SECRET,
    });
  });

  it('gives each brand its entry: its own endpoint and credential, or COMPLIANCE_URL with its credential', () => {
    const { settings, problems } = settingsOf(
      { COMPLIANCE_URL: 'https://o.example', COMPLIANCE_API_KEY: SECRET },
      {
        '4': { url: 'https://brand4.example/api', username: 'b4', password: 'p4' },
        '5': { url: 'https://brand5.example' },
        '6': { apiKey: 'k6', apiKeyHeader: 'X-Key' },
        '7': {},
      },
    );
    expect(problems).toEqual([]);
    expect(settings?.brands).toEqual(
      new Map([
        ['4', { url: 'https://brand4.example/api', credential: { kind: 'basic', username: 'b4', password: 'p4' } }],
        // Its own host: COMPLIANCE_URL's key is never sent there.
        ['5', { url: 'https://brand5.example' }],
        ['6', { url: 'https://o.example', credential: { kind: 'api-key', header: 'X-Key', key: 'k6' } }],
        ['7', { url: 'https://o.example', credential: { kind: 'api-key', header: 'X-Api-Key', key: SECRET } }],
      ]),
    );
  });

  it('is a gate for the brands with an entry when COMPLIANCE_URL is unset', () => {
    const { settings } = settingsOf({}, { '4': { url: 'https://brand4.example', apiKey: 'k4' } });
    expect(settings?.default).toBeUndefined();
    expect([...settings!.brands.keys()]).toEqual(['4']);
  });

  it('refuses bad values, naming the variable and never quoting a secret', () => {
    const { settings, problems } = settingsOf(
      {
        COMPLIANCE_URL: `https://crm:${SECRET}@o.example`,
        COMPLIANCE_API_KEY: SECRET,
        COMPLIANCE_USERNAME: 'crm',
        COMPLIANCE_PASSWORD: SECRET,
        COMPLIANCE_CACHE_TTL: 'a minute',
        COMPLIANCE_MAX_WAIT: '0',
      },
      {
        '4': { url: 'ftp://brand4.example', password: SECRET },
        '5': 'https://brand5.example',
        '6': { url: 'https://brand6.example', apiKey: SECRET, apiKeyHeader: 'X Key', token: SECRET },
      },
    );
    expect(settings).toBeUndefined();
    expect(problems).toEqual([
      'compliance credentials: set COMPLIANCE_API_KEY or COMPLIANCE_USERNAME and COMPLIANCE_PASSWORD, not both',
      'COMPLIANCE_URL must not hold credentials (set the username and password apart)',
      'PUSH_CREDENTIALS_FILE brand 4 compliance: set username and password together',
      'PUSH_CREDENTIALS_FILE brand 4 compliance: url must be an http:// or https:// URL',
      'PUSH_CREDENTIALS_FILE brand 5 compliance must be an object of url, apiKey, apiKeyHeader, username, password',
      'PUSH_CREDENTIALS_FILE brand 6 compliance: unknown field token',
      'PUSH_CREDENTIALS_FILE brand 6 compliance: apiKeyHeader must be a header name',
      'COMPLIANCE_CACHE_TTL must be a duration (like 60s, 5m, 1h, or seconds), got "a minute"',
      'COMPLIANCE_MAX_WAIT must be longer than 0',
    ]);
    expect(problems.join('\n')).not.toContain(SECRET);
  });

  it('refuses a credential without an endpoint, and a brand entry without a url when COMPLIANCE_URL is unset', () => {
    expect(settingsOf({ COMPLIANCE_API_KEY: SECRET }).problems).toEqual(['compliance credentials: COMPLIANCE_API_KEY is set without COMPLIANCE_URL']);
    expect(settingsOf({ COMPLIANCE_USERNAME: 'crm' }).problems).toEqual(['compliance credentials: set COMPLIANCE_USERNAME and COMPLIANCE_PASSWORD together']);
    expect(settingsOf({}, { '4': { apiKey: SECRET } }).problems).toEqual(['PUSH_CREDENTIALS_FILE brand 4 compliance: set url (COMPLIANCE_URL is not set)']);
  });

  it('refuses bad knobs through the schema, by name', () => {
    const error = (() => {
      try {
        parseEnv(ComplianceEnv, { COMPLIANCE_CONCURRENCY: '0', COMPLIANCE_TIMEOUT_MS: 'soon', COMPLIANCE_CONSENT_DEFAULT: 'maybe' });
      } catch (caught) {
        return caught as ConfigError;
      }
      throw new Error('no ConfigError');
    })();
    expect(error.problems).toEqual([
      'COMPLIANCE_CONSENT_DEFAULT must be one of opted-out, opted-in, got "maybe"',
      'COMPLIANCE_TIMEOUT_MS must be a number, got "soon"',
      'COMPLIANCE_CONCURRENCY must be integer to be greater or equal to 1',
    ]);
  });
});
