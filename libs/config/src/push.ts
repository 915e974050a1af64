import { readFileSync } from 'node:fs';
import { Type, type Static } from '@sinclair/typebox';
import type { ProviderName } from '@operator/contract';
import { ConfigError, parseEnv, type Env } from './env';
import { DatabaseEnv, databaseProblems, EgressEnv, egressSettings, MetricsEnv, PushSendEnv, RuntimeEnv, type EgressSettings } from './base';
import { RedisEnv, redisConnectionOf, type RedisConnection, type RedisVariable, withoutRedisVariables } from './redis';
import { TrackingEnv, trackingProblems } from './events';
import { PushProviderTuningEnv, refusedTuning, sharedTuningField, tuningOf, type PushTuning } from './push-tuning';
import { WebPushOriginsEnv, webpushAllowedOriginsOf, type AllowedOrigin } from './origins';

export * from './push-tuning';

// Their defaults and minimums come from the tuning table (push-tuning.ts), as do PushSendEnv's.
export const PushWorkerEnv = Type.Object({
  PUSH_WORKER_CONCURRENCY: sharedTuningField('workerConcurrency'),
  PUSH_WORKER_PARALLEL_MESSAGES: sharedTuningField('parallelMessages'),
  PUSH_CLAIM_LEASE_MS: sharedTuningField('claimLeaseMs'),
  PUSH_RECONCILE_INTERVAL_MS: sharedTuningField('reconcileIntervalMs'),
  PUSH_RECONCILE_AFTER_MS: sharedTuningField('reconcileAfterMs'),
  PUSH_CREDENTIALS_FILE: Type.String({ default: '', description: 'JSON file of per-brand provider credentials (see docs/operating.md)' }),
  // A bound on what a provider (or anyone running a Web Push endpoint) may ask for, not a sizing
  // knob: it stays out of the tuning table. Every Retry-After is clamped to it before it delays a
  // delivery or pauses a credential.
  PUSH_RETRY_AFTER_MAX_MS: Type.Integer({
    default: 300000,
    minimum: 1000,
    description: "Longest wait a provider's Retry-After can impose, on one delivery's retry or on one credential's pause; longer ones are cut to this",
  }),
  // How long a provider's answer may wait in memory: a worker killed now sends again what it had on
  // the wire and the answers of the last interval. Shorter means more, smaller writes.
  PUSH_RECORD_INTERVAL_MS: Type.Integer({
    default: 100,
    minimum: 1,
    maximum: 1000,
    description: "Most time a provider's answer waits before it is written: the answers of all the worker's jobs are written together this long after the first one waiting",
  }),
});

export const FcmEnv = Type.Object({
  FCM_SERVICE_ACCOUNT_FILE: Type.String({ default: '', description: 'Service account JSON of the Firebase project (default brand)' }),
  FCM_ENDPOINT: Type.String({ default: '', description: 'https origin every FCM connection goes to instead (the FCM API and the OAuth token URL, real host names kept for TLS): proxies, tests' }),
});

export const ApnsEnv = Type.Object({
  APNS_KEY_FILE: Type.String({ default: '', description: 'The .p8 signing key from Apple (default brand)' }),
  APNS_KEY_ID: Type.String({ default: '', description: 'Key id of that key' }),
  APNS_TEAM_ID: Type.String({ default: '', description: 'Apple developer team id' }),
  APNS_TOPIC: Type.String({ default: '', description: 'The app bundle id' }),
  APNS_PRODUCTION: Type.Boolean({ default: false, description: 'true: api.push.apple.com; false: the sandbox endpoint' }),
  APNS_HOST: Type.String({ default: '', description: 'Overrides the APNs host (proxies, tests)' }),
  APNS_PORT: Type.Integer({ default: 443, minimum: 1, maximum: 65535, description: 'Overrides the APNs port' }),
});

export const WebPushEnv = Type.Object({
  VAPID_PUBLIC_KEY: Type.String({ default: '', description: 'VAPID public key, base64url (default brand)' }),
  VAPID_PRIVATE_KEY: Type.String({ default: '', description: 'VAPID private key, base64url' }),
  VAPID_SUBJECT: Type.String({ default: '', description: 'mailto: or https: contact of the sender' }),
  ...WebPushOriginsEnv.properties,
});

export const HmsEnv = Type.Object({
  HMS_APP_ID: Type.String({ default: '', description: 'App id of the AppGallery Connect app: the OAuth client id of Push Kit (default brand)' }),
  HMS_APP_SECRET: Type.String({ default: '', description: 'App secret of that app: the OAuth client secret' }),
  HMS_ENDPOINT: Type.String({ default: '', description: 'https origin that takes every Push Kit request instead (the push API and the OAuth token URL): proxies, tests' }),
});

export const OneSignalEnv = Type.Object({
  ONESIGNAL_APP_ID: Type.String({ default: '', description: 'OneSignal app id (default brand)' }),
  ONESIGNAL_REST_API_KEY: Type.String({ default: '', description: "The app's REST API key" }),
  ONESIGNAL_ENDPOINT: Type.String({ default: '', description: 'https origin that takes every OneSignal request instead of https://api.onesignal.com: proxies, tests' }),
});

export interface FcmCredential {
  serviceAccount: { project_id: string; client_email: string; private_key: string };
  /** FCM_ENDPOINT: an https origin that takes every connection (FCM API and OAuth token URL). */
  endpoint?: string;
}
export interface ApnsCredential {
  /** The provider token signing key (.p8, PEM). */
  key: string;
  keyId: string;
  teamId: string;
  /** The app's bundle id: the apns-topic of every push. */
  topic: string;
  /** api.push.apple.com when true, api.sandbox.push.apple.com when false (unless host is given). */
  production: boolean;
  /** Another APNs host (a local fake); the TLS server name is this host. */
  host?: string;
  port?: number;
}
export interface WebPushCredential {
  vapid: { publicKey: string; privateKey: string; subject: string };
}
export interface HmsCredential {
  appId: string;
  appSecret: string;
  /** HMS_ENDPOINT: an https origin that takes every request (push API and OAuth token URL). */
  endpoint?: string;
}
export interface OneSignalCredential {
  appId: string;
  restApiKey: string;
  /** ONESIGNAL_ENDPOINT: an https origin that takes every request. */
  endpoint?: string;
}
export interface Credentials {
  fcm: FcmCredential;
  apns: ApnsCredential;
  webpush: WebPushCredential;
  hms: HmsCredential;
  onesignal: OneSignalCredential;
}

/** Credentials of one provider: the default brand's and each configured brand's. */
export interface ProviderCredentials<P extends ProviderName> {
  default?: Credentials[P];
  brands: Map<string, Credentials[P]>;
}

export const WorkerConfigSchema = Type.Composite([RuntimeEnv, DatabaseEnv, RedisEnv, MetricsEnv, EgressEnv, PushSendEnv, TrackingEnv, PushWorkerEnv, PushProviderTuningEnv, FcmEnv, ApnsEnv, WebPushEnv, HmsEnv, OneSignalEnv]);
export type PushWorkerConfig<P extends ProviderName> = Omit<Static<typeof WorkerConfigSchema>, RedisVariable | 'WEBPUSH_ALLOWED_ORIGINS'> & {
  provider: P;
  redis: RedisConnection;
  credentials: ProviderCredentials<P>;
  /** No credentials at all: sends are accepted locally (development only). */
  sandbox: boolean;
  /** This provider's row of the tuning table, with the environment's overrides. */
  tuning: PushTuning;
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY: every connection to the provider goes through the proxy. */
  egress: EgressSettings;
  /**
   * WEBPUSH_ALLOWED_ORIGINS: the push services the Web Push worker may send to. Empty on the FCM
   * and APNs workers, which do not read the variable.
   */
  webpushAllowedOrigins: AllowedOrigin[];
};

type Problems = string[];

function readText(path: string, what: string, problems: Problems): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    problems.push(`${what}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    return undefined;
  }
}

function fcmFromFile(path: string, what: string, problems: Problems): FcmCredential | undefined {
  const text = readText(path, what, problems);
  if (text === undefined) return undefined;
  try {
    const account = JSON.parse(text);
    for (const field of ['project_id', 'client_email', 'private_key']) {
      if (typeof account[field] !== 'string' || !account[field]) problems.push(`${what}: ${path} has no ${field}`);
    }
    return { serviceAccount: account };
  } catch {
    problems.push(`${what}: ${path} is not JSON`);
    return undefined;
  }
}

/** `names` renames fields in the problem (the default brand's come from environment variables). */
function requireAll(values: Record<string, unknown>, what: string, problems: Problems, names: Record<string, string> = {}): boolean {
  const absent = Object.entries(values)
    .filter(([, value]) => value === undefined || value === '')
    .map(([name]) => names[name] ?? name);
  if (absent.length) problems.push(`${what}: set ${absent.join(', ')} as well`);
  return absent.length === 0;
}

type BrandEntry = {
  fcm?: { serviceAccountFile?: string };
  apns?: { keyFile?: string; keyId?: string; teamId?: string; topic?: string; production?: boolean; host?: string; port?: number };
  webpush?: { publicKey?: string; privateKey?: string; subject?: string };
  hms?: { appId?: string; appSecret?: string };
  onesignal?: { appId?: string; restApiKey?: string };
};

function credentialFrom<P extends ProviderName>(
  provider: P,
  entry: BrandEntry,
  what: string,
  problems: Problems,
  names: Record<string, string> = {},
): Credentials[P] | undefined {
  if (provider === 'fcm') {
    const file = entry.fcm?.serviceAccountFile;
    if (!requireAll({ serviceAccountFile: file }, what, problems, names)) return undefined;
    return fcmFromFile(file!, what, problems) as Credentials[P] | undefined;
  }
  if (provider === 'apns') {
    const a = entry.apns ?? {};
    if (!requireAll({ keyFile: a.keyFile, keyId: a.keyId, teamId: a.teamId, topic: a.topic }, what, problems, names)) return undefined;
    const key = readText(a.keyFile!, what, problems);
    if (key === undefined) return undefined;
    return { key, keyId: a.keyId!, teamId: a.teamId!, topic: a.topic!, production: a.production === true, host: a.host || undefined, port: a.port } as Credentials[P];
  }
  if (provider === 'hms') {
    const h = entry.hms ?? {};
    if (!requireAll({ appId: h.appId, appSecret: h.appSecret }, what, problems, names)) return undefined;
    return { appId: String(h.appId), appSecret: String(h.appSecret) } as Credentials[P];
  }
  if (provider === 'onesignal') {
    const o = entry.onesignal ?? {};
    if (!requireAll({ appId: o.appId, restApiKey: o.restApiKey }, what, problems, names)) return undefined;
    if (!ONESIGNAL_APP_ID.test(String(o.appId))) problems.push(`${what}: the OneSignal app id must be a UUID`);
    return { appId: String(o.appId), restApiKey: String(o.restApiKey) } as Credentials[P];
  }
  const w = entry.webpush ?? {};
  if (!requireAll({ publicKey: w.publicKey, privateKey: w.privateKey, subject: w.subject }, what, problems, names)) return undefined;
  if (!/^(mailto:|https:)/.test(w.subject!)) problems.push(`${what}: the VAPID subject must start with mailto: or https:`);
  return { vapid: { publicKey: w.publicKey!, privateKey: w.privateKey!, subject: w.subject! } } as Credentials[P];
}

const ONESIGNAL_APP_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function defaultEntry(raw: Static<typeof WorkerConfigSchema>): BrandEntry {
  return {
    fcm: { serviceAccountFile: raw.FCM_SERVICE_ACCOUNT_FILE },
    apns: {
      keyFile: raw.APNS_KEY_FILE,
      keyId: raw.APNS_KEY_ID,
      teamId: raw.APNS_TEAM_ID,
      topic: raw.APNS_TOPIC,
      production: raw.APNS_PRODUCTION,
      host: raw.APNS_HOST,
      port: raw.APNS_PORT,
    },
    webpush: { publicKey: raw.VAPID_PUBLIC_KEY, privateKey: raw.VAPID_PRIVATE_KEY, subject: raw.VAPID_SUBJECT },
    hms: { appId: raw.HMS_APP_ID, appSecret: raw.HMS_APP_SECRET },
    onesignal: { appId: raw.ONESIGNAL_APP_ID, restApiKey: raw.ONESIGNAL_REST_API_KEY },
  };
}

/** The environment variable behind each field of the default brand's entry. */
const DEFAULT_NAMES: Record<ProviderName, Record<string, string>> = {
  fcm: { serviceAccountFile: 'FCM_SERVICE_ACCOUNT_FILE' },
  apns: { keyFile: 'APNS_KEY_FILE', keyId: 'APNS_KEY_ID', teamId: 'APNS_TEAM_ID', topic: 'APNS_TOPIC' },
  webpush: { publicKey: 'VAPID_PUBLIC_KEY', privateKey: 'VAPID_PRIVATE_KEY', subject: 'VAPID_SUBJECT' },
  hms: { appId: 'HMS_APP_ID', appSecret: 'HMS_APP_SECRET' },
  onesignal: { appId: 'ONESIGNAL_APP_ID', restApiKey: 'ONESIGNAL_REST_API_KEY' },
};

const DEFAULT_VARIABLES: Record<ProviderName, string[]> = {
  fcm: ['FCM_SERVICE_ACCOUNT_FILE'],
  apns: ['APNS_KEY_FILE', 'APNS_KEY_ID', 'APNS_TEAM_ID', 'APNS_TOPIC'],
  webpush: ['VAPID_PUBLIC_KEY', 'VAPID_PRIVATE_KEY', 'VAPID_SUBJECT'],
  hms: ['HMS_APP_ID', 'HMS_APP_SECRET'],
  onesignal: ['ONESIGNAL_APP_ID', 'ONESIGNAL_REST_API_KEY'],
};

/** The endpoint override of each provider that has one: an https origin every request goes to. */
const ENDPOINT_VARIABLES: Partial<Record<ProviderName, 'FCM_ENDPOINT' | 'HMS_ENDPOINT' | 'ONESIGNAL_ENDPOINT'>> = {
  fcm: 'FCM_ENDPOINT',
  hms: 'HMS_ENDPOINT',
  onesignal: 'ONESIGNAL_ENDPOINT',
};

/** Why an endpoint override (FCM_ENDPOINT, ...) is not an https origin (`https://host[:port]`), or undefined when it is. */
function endpointProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${value} is not a URL`;
  }
  if (url.protocol !== 'https:') return `${value} must be an https origin`;
  if (url.pathname !== '/' || url.search || url.hash || url.username || url.password) return `${value} must be an origin only (https://host[:port])`;
  return undefined;
}

/**
 * The configuration of one provider's worker. Credentials come from the environment (the default
 * brand) and from PUSH_CREDENTIALS_FILE (per brand). With none at all the worker uses its sandbox,
 * which production refuses.
 */
export function loadPushWorkerConfig<P extends ProviderName>(provider: P, env: Env = process.env): PushWorkerConfig<P> {
  const refused = refusedTuning(provider, env);
  const redis = redisConnectionOf(env);
  const webpushOrigins = provider === 'webpush' ? webpushAllowedOriginsOf(env) : { origins: [], problems: [] };
  const raw = parseEnv(WorkerConfigSchema, env, [...refused, ...redis.problems, ...webpushOrigins.problems]);
  const tuning = tuningOf(provider, raw);
  const problems: Problems = [...refused, ...databaseProblems(raw), ...redis.problems, ...trackingProblems(raw), ...webpushOrigins.problems];
  const credentials: ProviderCredentials<P> = { brands: new Map() };

  if (DEFAULT_VARIABLES[provider].some((name) => env[name])) {
    credentials.default = credentialFrom(provider, defaultEntry(raw), `default ${provider} credentials`, problems, DEFAULT_NAMES[provider]);
  }
  if (raw.PUSH_CREDENTIALS_FILE) {
    const text = readText(raw.PUSH_CREDENTIALS_FILE, 'PUSH_CREDENTIALS_FILE', problems);
    let brands: Record<string, BrandEntry> = {};
    try {
      brands = text === undefined ? {} : (JSON.parse(text).brands ?? {});
    } catch {
      problems.push(`PUSH_CREDENTIALS_FILE: ${raw.PUSH_CREDENTIALS_FILE} is not JSON`);
    }
    for (const [brandId, entry] of Object.entries(brands)) {
      if (!/^\d+$/.test(brandId)) problems.push(`PUSH_CREDENTIALS_FILE: brand "${brandId}" is not a brand id`);
      if (entry === null || typeof entry !== 'object') {
        problems.push(`PUSH_CREDENTIALS_FILE: brand ${brandId} must be an object of provider credentials`);
        continue;
      }
      if (!entry[provider]) continue;
      const credential = credentialFrom(provider, entry, `PUSH_CREDENTIALS_FILE brand ${brandId} ${provider}`, problems);
      if (credential) credentials.brands.set(brandId, credential);
    }
  }
  const endpointVariable = ENDPOINT_VARIABLES[provider];
  const endpoint = endpointVariable ? raw[endpointVariable] : '';
  if (endpointVariable && endpoint) {
    const problem = endpointProblem(endpoint);
    if (problem) problems.push(`${endpointVariable}: ${problem}`);
    // A network-level override (a proxy, a local test server): every client of this worker uses it.
    for (const credential of [credentials.default, ...credentials.brands.values()] as ({ endpoint?: string } | undefined)[]) {
      if (credential) credential.endpoint = endpoint;
    }
  }
  const sandbox = !credentials.default && credentials.brands.size === 0;
  if (sandbox && raw.NODE_ENV === 'production') {
    problems.push(`no ${provider} credentials: set ${DEFAULT_VARIABLES[provider].join(', ')} or PUSH_CREDENTIALS_FILE (the sandbox is refused in production)`);
  }
  const { egress, problems: egressProblems } = egressSettings(raw, env);
  problems.push(...egressProblems);
  // A delivery deferred for longer would look stranded to the reconciler, which would enqueue it
  // again before its Retry-After is over.
  if (raw.PUSH_RETRY_AFTER_MAX_MS > tuning.reconcileAfterMs) {
    problems.push(`PUSH_RETRY_AFTER_MAX_MS (${raw.PUSH_RETRY_AFTER_MAX_MS}) must not exceed PUSH_RECONCILE_AFTER_MS (${tuning.reconcileAfterMs})`);
  }
  if (problems.length) throw new ConfigError(problems);
  const { WEBPUSH_ALLOWED_ORIGINS: _w, ...rest } = raw;
  return { ...withoutRedisVariables(rest), redis: redis.connection, provider, credentials, sandbox, tuning, egress, webpushAllowedOrigins: webpushOrigins.origins };
}
