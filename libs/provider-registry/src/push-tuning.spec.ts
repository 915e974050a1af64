import type { ProviderName } from '@operator/contract';
import { ConfigError, PER_PROVIDER_KNOBS, PUSH_TUNING_KNOBS, PushProviderTuningEnv, PushSendEnv, PushWorkerEnv, type Env, type PushTuning } from '@operator/config';
import { loadPushWorkerConfig, PUSH_TUNING, pushTuning } from './config';
import { PROVIDER_NAMES, PROVIDERS as REGISTERED } from './registry';
import { configErrorOf } from '@operator/testing';

const PROVIDERS: ProviderName[] = ['fcm', 'apns', 'webpush', 'hms', 'onesignal'];

const tuningError = (provider: ProviderName, env: Env) => configErrorOf(() => pushTuning(provider, env));

// The values each worker runs with. They changed once on purpose, for sends that fill the pipe: a
// job's messages are handed to the provider client at once (parallelMessages 16 -> 100),
// and FCM's and APNs' sends in flight follow their connections (providerConnections x the streams
// the server allows) rather than a cap of FCM's 500.
const SHARED = {
  workerConcurrency: 10,
  parallelMessages: 100,
  claimLeaseMs: 60000,
  reconcileIntervalMs: 30000,
  reconcileAfterMs: 300000,
  sendAttempts: 8,
  sendBackoffMs: 1000,
  jobMaxMessages: 100,
  visibilityGraceMs: 30000,
  lockDurationMs: 30000,
};
const TODAY: Record<ProviderName, PushTuning> = {
  // provider-fcm: DEFAULT_MAX_CONNECTIONS 8, DEFAULT_TIMEOUT_MS 15000.
  fcm: { ...SHARED, providerConcurrency: null, providerConnections: 8, sendTimeoutMs: 15000 },
  // provider-apns: DEFAULT_MAX_CONNECTIONS 4, node-apn's requestTimeout 5000.
  apns: { ...SHARED, providerConcurrency: null, providerConnections: 4, sendTimeoutMs: 5000 },
  // provider-webpush: DEFAULT_CONCURRENCY 16, DEFAULT_CONNECTIONS_PER_ORIGIN 100, DEFAULT_TIMEOUT_MS 10000.
  webpush: { ...SHARED, providerConcurrency: 16, providerConnections: 100, sendTimeoutMs: 10000 },
  // provider-hms and provider-onesignal: DEFAULT_MAX_CONNECTIONS 32, DEFAULT_TIMEOUT_MS 15000.
  hms: { ...SHARED, providerConcurrency: null, providerConnections: 32, sendTimeoutMs: 15000 },
  onesignal: { ...SHARED, providerConcurrency: null, providerConnections: 32, sendTimeoutMs: 15000 },
};

const VARIABLES = {
  workerConcurrency: 'PUSH_WORKER_CONCURRENCY',
  parallelMessages: 'PUSH_WORKER_PARALLEL_MESSAGES',
  claimLeaseMs: 'PUSH_CLAIM_LEASE_MS',
  reconcileIntervalMs: 'PUSH_RECONCILE_INTERVAL_MS',
  reconcileAfterMs: 'PUSH_RECONCILE_AFTER_MS',
  sendAttempts: 'PUSH_SEND_ATTEMPTS',
  sendBackoffMs: 'PUSH_SEND_BACKOFF_MS',
  providerConcurrency: 'PUSH_PROVIDER_CONCURRENCY',
  providerConnections: 'PUSH_PROVIDER_CONNECTIONS',
  sendTimeoutMs: 'PUSH_SEND_TIMEOUT_MS',
} as const;
type Tunable = keyof typeof VARIABLES;

/** A value each variable accepts, above its minimum and unlike every default. */
const OVERRIDES: Record<Tunable, number> = {
  workerConcurrency: 3,
  parallelMessages: 4,
  claimLeaseMs: 5000,
  reconcileIntervalMs: 2000,
  reconcileAfterMs: 20000,
  sendAttempts: 2,
  sendBackoffMs: 250,
  providerConcurrency: 64,
  providerConnections: 3,
  sendTimeoutMs: 2500,
};

/** The knobs a provider's variables set: every one, on every worker. */
const settable = (_provider: ProviderName) => Object.keys(VARIABLES) as Tunable[];

describe('PUSH_TUNING', () => {
  it('has one row per provider and one column per knob', () => {
    expect(Object.keys(PUSH_TUNING).sort()).toEqual([...PROVIDER_NAMES].sort());
    for (const provider of PROVIDER_NAMES) expect(Object.keys(PUSH_TUNING[provider]).sort()).toEqual(Object.keys(PUSH_TUNING_KNOBS).sort());
  });

  it.each(PROVIDERS)('holds the values %s ran with before', (provider) => {
    expect(PUSH_TUNING[provider]).toEqual(TODAY[provider]);
  });

  it('keeps the variables operators configure against, adds only the provider concurrency and connections and the send timeout, and fixes the rest', () => {
    const variables = Object.fromEntries(Object.entries(PUSH_TUNING_KNOBS).flatMap(([knob, spec]) => ('variable' in spec ? [[knob, spec.variable]] : [])));
    expect(variables).toEqual(VARIABLES);
    for (const knob of ['jobMaxMessages', 'visibilityGraceMs', 'lockDurationMs'] as const) expect(PUSH_TUNING_KNOBS[knob]).toEqual(expect.objectContaining({ fixed: true }));
  });

  it('gives the shared schemas the defaults, minimums and meanings of the table', () => {
    const shared: Record<string, unknown> = { ...PushWorkerEnv.properties, ...PushSendEnv.properties };
    for (const [knob, spec] of Object.entries(PUSH_TUNING_KNOBS) as [keyof PushTuning, (typeof PUSH_TUNING_KNOBS)[keyof PushTuning]][]) {
      if (!('variable' in spec) || !(spec.variable in shared)) continue;
      const { default: value, minimum, description, type } = shared[spec.variable] as Record<string, unknown>;
      expect({ variable: spec.variable, default: value, minimum, description, type }).toEqual({
        variable: spec.variable,
        default: PUSH_TUNING.fcm[knob],
        minimum: spec.minimum,
        description: spec.meaning,
        type: 'integer',
      });
    }
    // Those that differ by provider have no default in the schema every worker shares.
    expect(Object.keys(PushProviderTuningEnv.properties).sort()).toEqual(['PUSH_PROVIDER_CONCURRENCY', 'PUSH_PROVIDER_CONNECTIONS', 'PUSH_SEND_TIMEOUT_MS']);
    for (const field of Object.values(PushProviderTuningEnv.properties)) expect(field.default).toBeUndefined();
  });

  it('has no knob a worker refuses: a provider sets only the knobs whose default differs by provider', () => {
    for (const provider of REGISTERED) expect({ provider: provider.name, knobs: Object.keys(provider.tuning).filter((knob) => !(PER_PROVIDER_KNOBS as readonly string[]).includes(knob)) }).toEqual({ provider: provider.name, knobs: [] });
  });
});

describe('pushTuning', () => {
  it.each(PROVIDERS)('gives %s its row when nothing is set', (provider) => {
    expect(pushTuning(provider, {})).toEqual(TODAY[provider]);
  });

  it('treats an empty variable as unset, as the other variables are', () => {
    expect(pushTuning('fcm', { PUSH_PROVIDER_CONCURRENCY: '', PUSH_PROVIDER_CONNECTIONS: '', PUSH_SEND_TIMEOUT_MS: '' })).toEqual(TODAY.fcm);
    expect(pushTuning('apns', { PUSH_PROVIDER_CONCURRENCY: '', PUSH_PROVIDER_CONNECTIONS: '', PUSH_SEND_TIMEOUT_MS: '' })).toEqual(TODAY.apns);
  });

  it('does not change the table', () => {
    pushTuning('webpush', { PUSH_PROVIDER_CONCURRENCY: '1', PUSH_WORKER_CONCURRENCY: '1' });
    expect(PUSH_TUNING.webpush).toEqual(TODAY.webpush);
  });

  describe.each(PROVIDERS)('%s', (provider) => {
    it.each(settable(provider))('applies the variable of %s, and only to it', (knob) => {
      const tuning = pushTuning(provider, { [VARIABLES[knob]]: String(OVERRIDES[knob]) });
      expect(tuning).toEqual({ ...TODAY[provider], [knob]: OVERRIDES[knob] });
    });

    it('applies every variable at once', () => {
      const env = Object.fromEntries(settable(provider).map((knob) => [VARIABLES[knob], String(OVERRIDES[knob])]));
      const overridden = Object.fromEntries(settable(provider).map((knob) => [knob, OVERRIDES[knob]]));
      expect(pushTuning(provider, env)).toEqual({ ...TODAY[provider], ...overridden });
    });

    it.each(settable(provider))('names the variable of %s when it is not a number', (knob) => {
      const variable = VARIABLES[knob];
      expect(tuningError(provider, { [variable]: 'lots' }).problems).toEqual([`${variable} must be a number, got "lots"`]);
    });

    it.each(settable(provider))('names the variable of %s when it is not an integer', (knob) => {
      const variable = VARIABLES[knob];
      expect(tuningError(provider, { [variable]: String(OVERRIDES[knob] + 0.5) }).problems).toEqual([expect.stringMatching(new RegExp(`^${variable} `))]);
    });

    it.each(settable(provider))('names the variable of %s when it is below its minimum', (knob) => {
      const variable = VARIABLES[knob];
      const spec = PUSH_TUNING_KNOBS[knob] as { minimum: number };
      expect(pushTuning(provider, { [variable]: String(spec.minimum) })[knob]).toBe(spec.minimum);
      const problems = tuningError(provider, { [variable]: String(spec.minimum - 1) }).problems;
      expect(problems).toEqual([expect.stringMatching(new RegExp(`^${variable} `))]);
      expect(problems[0]).toContain(String(spec.minimum));
    });
  });

  it('holds the minimums that keep a worker sane', () => {
    expect(tuningError('fcm', { PUSH_CLAIM_LEASE_MS: '999' }).problems).toEqual([expect.stringContaining('PUSH_CLAIM_LEASE_MS')]);
    expect(tuningError('fcm', { PUSH_PROVIDER_CONCURRENCY: '0' }).problems).toEqual([expect.stringContaining('PUSH_PROVIDER_CONCURRENCY')]);
    expect(tuningError('apns', { PUSH_PROVIDER_CONNECTIONS: '0' }).problems).toEqual([expect.stringContaining('PUSH_PROVIDER_CONNECTIONS')]);
    expect(tuningError('webpush', { PUSH_SEND_TIMEOUT_MS: '99' }).problems).toEqual([expect.stringContaining('PUSH_SEND_TIMEOUT_MS')]);
  });

  it('reports every bad variable at once', () => {
    const error = tuningError('webpush', { PUSH_WORKER_CONCURRENCY: '0', PUSH_SEND_TIMEOUT_MS: 'soon', PUSH_PROVIDER_CONCURRENCY: '8' });
    expect(error.problems).toHaveLength(2);
    expect(error.problems).toEqual(expect.arrayContaining([expect.stringContaining('PUSH_WORKER_CONCURRENCY'), expect.stringContaining('PUSH_SEND_TIMEOUT_MS')]));
    expect(error.message).toContain('PUSH_SEND_TIMEOUT_MS must be a number, got "soon"');
  });
});

describe('loadPushWorkerConfig: tuning', () => {
  it.each(PROVIDERS)('gives %s its row of the table as config.tuning', (provider) => {
    expect(loadPushWorkerConfig(provider, {}).tuning).toEqual(TODAY[provider]);
  });

  it('resolves config.tuning from the same variables as the flat fields', () => {
    const config = loadPushWorkerConfig('fcm', {
      PUSH_WORKER_CONCURRENCY: '3',
      PUSH_WORKER_PARALLEL_MESSAGES: '4',
      PUSH_CLAIM_LEASE_MS: '5000',
      PUSH_RECONCILE_INTERVAL_MS: '2000',
      PUSH_RECONCILE_AFTER_MS: '20000',
      // Within the reconciler's wait, as the workers require.
      PUSH_RETRY_AFTER_MAX_MS: '20000',
      PUSH_SEND_ATTEMPTS: '2',
      PUSH_SEND_BACKOFF_MS: '250',
      PUSH_PROVIDER_CONCURRENCY: '64',
      PUSH_PROVIDER_CONNECTIONS: '3',
      PUSH_SEND_TIMEOUT_MS: '2500',
    });
    expect(config.tuning).toEqual({ ...TODAY.fcm, ...OVERRIDES });
    expect(config).toMatchObject({
      PUSH_WORKER_CONCURRENCY: config.tuning.workerConcurrency,
      PUSH_WORKER_PARALLEL_MESSAGES: config.tuning.parallelMessages,
      PUSH_CLAIM_LEASE_MS: config.tuning.claimLeaseMs,
      PUSH_RECONCILE_INTERVAL_MS: config.tuning.reconcileIntervalMs,
      PUSH_RECONCILE_AFTER_MS: config.tuning.reconcileAfterMs,
      PUSH_SEND_ATTEMPTS: config.tuning.sendAttempts,
      PUSH_SEND_BACKOFF_MS: config.tuning.sendBackoffMs,
      PUSH_PROVIDER_CONCURRENCY: 64,
      PUSH_PROVIDER_CONNECTIONS: 3,
      PUSH_SEND_TIMEOUT_MS: 2500,
    });
  });

  it('reports a bad tuning variable with the other problems, in one ConfigError', () => {
    let error: unknown;
    try {
      loadPushWorkerConfig('apns', { PUSH_PROVIDER_CONNECTIONS: '0', PUSH_SEND_TIMEOUT_MS: 'soon' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.sort()).toEqual([expect.stringContaining('PUSH_PROVIDER_CONNECTIONS'), expect.stringContaining('PUSH_SEND_TIMEOUT_MS')]);
  });

  it('refuses a malformed provider variable by name', () => {
    expect(() => loadPushWorkerConfig('webpush', { PUSH_PROVIDER_CONCURRENCY: 'many' })).toThrow('PUSH_PROVIDER_CONCURRENCY must be a number, got "many"');
  });
});
