import { readFileSync } from 'node:fs';
import { Type, type Static, type TObject } from '@sinclair/typebox';
import { ConfigError, parseEnv, type Env } from './env';
import { DatabaseEnv, databaseProblems, EgressEnv, egressSettings, MetricsEnv, PushSendEnv, RuntimeEnv, type EgressSettings } from './base';
import { RedisEnv, redisConnectionOf, type RedisConnection, type RedisVariable, withoutRedisVariables } from './redis';
import { TrackingEnv, trackingProblems } from './events';
import { DEFAULT_TUNING, PushProviderTuningEnv, sharedTuningField, tuningOf, type PushTuning } from './push-tuning';
import { webpushAllowedOriginsOf, type AllowedOrigin } from './origins';
import { ComplianceEnv, complianceSettingsOf, COMPLIANCE_SECRET_VARIABLES, type ComplianceSettings } from './compliance';

export * from './push-tuning';

// A push worker's settings: what every worker reads, and how a provider's descriptor says what it
// reads of its own (ProviderSettings). Defaults and minimums of the knobs come from push-tuning.ts.
export const PushWorkerEnv = Type.Object({
  PUSH_WORKER_CONCURRENCY: sharedTuningField('workerConcurrency'),
  PUSH_WORKER_PARALLEL_MESSAGES: sharedTuningField('parallelMessages'),
  PUSH_CLAIM_LEASE_MS: sharedTuningField('claimLeaseMs'),
  PUSH_RECONCILE_INTERVAL_MS: sharedTuningField('reconcileIntervalMs'),
  PUSH_RECONCILE_AFTER_MS: sharedTuningField('reconcileAfterMs'),
  PUSH_CREDENTIALS_FILE: Type.String({ default: '', description: 'JSON file of per-brand provider credentials (see docs/operating.md)' }),
  // A bound on what a provider may ask for, not a sizing knob: it stays out of the tuning table.
  PUSH_RETRY_AFTER_MAX_MS: Type.Integer({
    default: 300000,
    minimum: 1000,
    description: "Longest wait a provider's Retry-After can impose, on one delivery's retry or on one credential's pause; longer ones are cut to this",
  }),
  // A worker killed now sends again the answers of the last interval; shorter means more, smaller writes.
  PUSH_RECORD_INTERVAL_MS: Type.Integer({
    default: 100,
    minimum: 1,
    maximum: 1000,
    description:
      "Most time a provider's answer waits before it is written: the answers of all the worker's jobs are written together this long after the first one waiting, or at once when no send of its jobs waits for an answer",
  }),
});

/** Reads one credential for a provider's descriptor, naming each problem after `what`. */
export interface CredentialReader {
  /** "default fcm credentials", "PUSH_CREDENTIALS_FILE brand 5 apns". */
  what: string;
  problem(text: string): void;
  /** False, after naming the absent ones, unless every field has a value. */
  requireAll(values: Record<string, unknown>): boolean;
  /** A file's text, or undefined after naming why it cannot be read. */
  readText(path: string): string | undefined;
}

/** What a provider's worker reads of its own: its variables and its per-brand credentials. */
export interface ProviderSettings<C> {
  /** Its variables: the default brand's credentials, its endpoint override. */
  env: TObject;
  /** The default brand's variable behind each field a credential requires: any of them set means a default credential. */
  variables: Record<string, string>;
  /** The variable behind each optional field of the default brand's credential. */
  optionalVariables?: Record<string, string>;
  /** The variable of an https origin every request goes to instead of the provider's (a proxy, a fake). */
  endpoint?: string;
  /** Reads WEBPUSH_ALLOWED_ORIGINS (the push services it may send to). */
  allowedOrigins?: boolean;
  /** A brand's entry of PUSH_CREDENTIALS_FILE (the default brand's: its variables) as a credential. */
  credential(entry: Record<string, unknown>, read: CredentialReader): C | undefined;
}

/** The part of a provider's descriptor a worker's configuration needs. */
export interface ProviderConfigPart<C> {
  name: string;
  settings: ProviderSettings<C>;
  /** Its knobs where they differ from DEFAULT_TUNING. */
  tuning: Partial<PushTuning>;
}

/** Credentials of one provider: the default brand's and each configured brand's. */
export interface ProviderCredentials<C> {
  default?: C;
  brands: Map<string, C>;
}

/** What every push worker reads, whichever its provider. */
export const WorkerBaseSchema = Type.Composite([RuntimeEnv, DatabaseEnv, RedisEnv, MetricsEnv, EgressEnv, PushSendEnv, TrackingEnv, PushWorkerEnv, PushProviderTuningEnv, ComplianceEnv]);
export type PushWorkerConfig<C = unknown> = Omit<Static<typeof WorkerBaseSchema>, RedisVariable> &
  Readonly<Record<string, unknown>> & {
    provider: string;
    redis: RedisConnection;
    credentials: ProviderCredentials<C>;
    /** No credentials at all: sends are accepted locally (development only). */
    sandbox: boolean;
    /** The provider's row of the tuning table, with the environment's overrides. */
    tuning: PushTuning;
    /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY: every connection to the provider goes through the proxy. */
    egress: EgressSettings;
    /** WEBPUSH_ALLOWED_ORIGINS, for a provider whose settings read it; empty on the others. */
    webpushAllowedOrigins: AllowedOrigin[];
    /** The responsible-gambling gate's endpoints and knobs; undefined: no gate (COMPLIANCE_URL unset, no brand's entry). */
    compliance: ComplianceSettings | undefined;
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

/** `names` renames fields in the problem (the default brand's come from environment variables). */
function reader(what: string, problems: Problems, names: Record<string, string> = {}): CredentialReader {
  return {
    what,
    problem: (text) => problems.push(`${what}: ${text}`),
    requireAll(values) {
      const absent = Object.entries(values)
        .filter(([, value]) => value === undefined || value === '')
        .map(([name]) => names[name] ?? name);
      if (absent.length) problems.push(`${what}: set ${absent.join(', ')} as well`);
      return absent.length === 0;
    },
    readText: (path) => readText(path, what, problems),
  };
}

function defaultEntry(settings: ProviderSettings<unknown>, raw: Record<string, unknown>): Record<string, unknown> {
  const fields = { ...settings.variables, ...settings.optionalVariables };
  return Object.fromEntries(Object.entries(fields).map(([field, variable]) => [field, raw[variable]]));
}

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
 * The configuration of one provider's worker. `schema` holds every variable a push worker parses
 * (WorkerBaseSchema and each provider's). Credentials come from the environment (the default brand)
 * and from PUSH_CREDENTIALS_FILE (per brand). With none at all the worker uses its sandbox, which
 * production refuses.
 */
export function loadWorkerConfigOf<C>(part: ProviderConfigPart<C>, schema: TObject, env: Env = process.env): PushWorkerConfig<C> {
  const { name: provider, settings } = part;
  const redis = redisConnectionOf(env);
  const webpushOrigins = settings.allowedOrigins ? webpushAllowedOriginsOf(env) : { origins: [], problems: [] };
  const raw = parseEnv(schema, env, [...redis.problems, ...webpushOrigins.problems]) as Static<typeof WorkerBaseSchema> & Record<string, unknown>;
  const tuning = tuningOf({ ...DEFAULT_TUNING, ...part.tuning }, raw);
  const problems: Problems = [...databaseProblems(raw), ...redis.problems, ...trackingProblems(raw), ...webpushOrigins.problems];
  const credentials: ProviderCredentials<C> = { brands: new Map() };
  const complianceEntries = new Map<string, unknown>();
  const defaultVariables = Object.values(settings.variables);

  if (defaultVariables.some((name) => env[name])) {
    const read = reader(`default ${provider} credentials`, problems, settings.variables);
    credentials.default = settings.credential(defaultEntry(settings, raw), read);
  }
  if (raw.PUSH_CREDENTIALS_FILE) {
    const text = readText(raw.PUSH_CREDENTIALS_FILE, 'PUSH_CREDENTIALS_FILE', problems);
    let brands: Record<string, Record<string, unknown>> = {};
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
      if (entry.compliance !== undefined) complianceEntries.set(brandId, entry.compliance);
      const own = entry[provider];
      if (!own) continue;
      const credential = settings.credential(typeof own === 'object' ? (own as Record<string, unknown>) : {}, reader(`PUSH_CREDENTIALS_FILE brand ${brandId} ${provider}`, problems));
      if (credential) credentials.brands.set(brandId, credential);
    }
  }
  const endpointVariable = settings.endpoint;
  const endpoint = endpointVariable ? String(raw[endpointVariable] ?? '') : '';
  if (endpointVariable && endpoint) {
    const problem = endpointProblem(endpoint);
    if (problem) problems.push(`${endpointVariable}: ${problem}`);
    for (const credential of [credentials.default, ...credentials.brands.values()] as ({ endpoint?: string } | undefined)[]) {
      if (credential) credential.endpoint = endpoint;
    }
  }
  const sandbox = !credentials.default && credentials.brands.size === 0;
  if (sandbox && raw.NODE_ENV === 'production') {
    problems.push(`no ${provider} credentials: set ${defaultVariables.join(', ')} or PUSH_CREDENTIALS_FILE (the sandbox is refused in production)`);
  }
  const { egress, problems: egressProblems } = egressSettings(raw, env);
  problems.push(...egressProblems);
  const compliance = complianceSettingsOf(raw, complianceEntries, problems);
  // A delivery deferred for longer would look stranded to the reconciler, which would enqueue it again.
  if (raw.PUSH_RETRY_AFTER_MAX_MS > tuning.reconcileAfterMs) {
    problems.push(`PUSH_RETRY_AFTER_MAX_MS (${raw.PUSH_RETRY_AFTER_MAX_MS}) must not exceed PUSH_RECONCILE_AFTER_MS (${tuning.reconcileAfterMs})`);
  }
  if (problems.length) throw new ConfigError(problems);
  const { WEBPUSH_ALLOWED_ORIGINS: _w, ...rest } = raw;
  for (const name of COMPLIANCE_SECRET_VARIABLES) delete (rest as Record<string, unknown>)[name];
  return { ...withoutRedisVariables(rest), redis: redis.connection, provider, credentials, sandbox, tuning, egress, webpushAllowedOrigins: webpushOrigins.origins, compliance } as PushWorkerConfig<C>;
}
