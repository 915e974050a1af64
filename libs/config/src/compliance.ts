import { Type, type Static } from '@sinclair/typebox';
import { splitList } from './env';
import { durationMs } from './events';

// The responsible-gambling gate of the push workers: where the operator's own records of a player's
// blocks and consents are read, with which credential, and how long an answer is trusted.
export const ComplianceEnv = Type.Object({
  COMPLIANCE_URL: Type.String({
    default: '',
    description: "Base URL of the operator's GET /userblocks/{user_id} and /userconsents/{user_id}; unset (and no brand's entry) means no gate",
  }),
  COMPLIANCE_API_KEY: Type.String({ default: '', description: 'API key sent to COMPLIANCE_URL in COMPLIANCE_API_KEY_HEADER' }),
  COMPLIANCE_API_KEY_HEADER: Type.String({ default: 'X-Api-Key', description: 'Header carrying COMPLIANCE_API_KEY' }),
  COMPLIANCE_USERNAME: Type.String({ default: '', description: 'HTTP Basic user towards COMPLIANCE_URL (instead of an API key)' }),
  COMPLIANCE_PASSWORD: Type.String({ default: '', description: 'HTTP Basic password towards COMPLIANCE_URL' }),
  COMPLIANCE_BLOCK_TYPES: Type.String({ default: '', description: 'Block types that suppress besides Excluded and Blocked, comma-separated' }),
  COMPLIANCE_CONSENT_DEFAULT: Type.Union([Type.Literal('opted-out'), Type.Literal('opted-in')], {
    default: 'opted-out',
    description: 'A player without a pushNotification consent entry: opted-out (sent nothing) or opted-in',
  }),
  COMPLIANCE_CACHE_TTL: Type.String({ default: '60s', description: "How long a player's answer is reused (like 60s, 5m; 0 asks every time)" }),
  COMPLIANCE_MAX_WAIT: Type.String({ default: '1h', description: 'How long a push waits for an answer after its acceptance before it fails as suppressed:unverified' }),
  COMPLIANCE_CONCURRENCY: Type.Integer({ default: 128, minimum: 1, description: 'Players looked up at once by one worker' }),
  COMPLIANCE_TIMEOUT_MS: Type.Integer({ default: 5000, minimum: 100, description: 'Time to wait for one answer of the endpoint' }),
});

export type ComplianceCredential =
  | { kind: 'api-key'; header: string; key: string }
  | { kind: 'basic'; username: string; password: string };

/** Where one brand's (or the default) records are read. */
export interface ComplianceEndpoint {
  /** Without a trailing slash: `{url}/userblocks/{user_id}`. */
  url: string;
  credential?: ComplianceCredential;
}

export interface ComplianceSettings {
  /** COMPLIANCE_URL's endpoint: brands without an entry of their own. */
  default?: ComplianceEndpoint;
  /** A brand's `compliance` entry of PUSH_CREDENTIALS_FILE. */
  brands: Map<string, ComplianceEndpoint>;
  /** Lower-cased block types that suppress as `blocked` (Blocked and COMPLIANCE_BLOCK_TYPES); Excluded suppresses as `excluded`. */
  blockTypes: string[];
  consentDefault: 'opted-out' | 'opted-in';
  cacheTtlMs: number;
  maxWaitMs: number;
  concurrency: number;
  timeoutMs: number;
}

export type ComplianceRaw = Static<typeof ComplianceEnv>;

/** Why a base URL is refused, never quoting it: it could hold a password. */
function urlProblem(value: string): string | undefined {
  if (!URL.canParse(value)) return 'must be an http:// or https:// URL';
  const url = new URL(value);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http:// or https:// URL';
  if (url.username || url.password) return 'must not hold credentials (set the username and password apart)';
  if (url.search || url.hash) return 'must not have a query or fragment';
  return undefined;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

interface EndpointFields {
  url?: unknown;
  apiKey?: unknown;
  apiKeyHeader?: unknown;
  username?: unknown;
  password?: unknown;
}

/** An endpoint's credential, naming problems after the variables or fields (`names`) and never quoting a secret. */
function credentialOf(fields: EndpointFields, what: string, names: Record<keyof EndpointFields, string>, problems: string[]): ComplianceCredential | undefined {
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  for (const field of ['apiKey', 'apiKeyHeader', 'username', 'password'] as const) {
    if (fields[field] !== undefined && typeof fields[field] !== 'string') problems.push(`${what}: ${names[field]} must be a string`);
  }
  const apiKey = text(fields.apiKey);
  const username = text(fields.username);
  const password = text(fields.password);
  const header = text(fields.apiKeyHeader) || 'X-Api-Key';
  if (apiKey && (username || password)) {
    problems.push(`${what}: set ${names.apiKey} or ${names.username} and ${names.password}, not both`);
    return undefined;
  }
  if (apiKey) {
    if (!HEADER_NAME.test(header)) problems.push(`${what}: ${names.apiKeyHeader} must be a header name`);
    return { kind: 'api-key', header, key: apiKey };
  }
  if (username || password) {
    if (!username || !password) {
      problems.push(`${what}: set ${names.username} and ${names.password} together`);
      return undefined;
    }
    if (username.includes(':')) problems.push(`${what}: ${names.username} must not contain ":"`);
    return { kind: 'basic', username, password };
  }
  return undefined;
}

function duration(name: string, value: string, problems: string[]): number {
  try {
    return durationMs(value);
  } catch {
    problems.push(`${name} must be a duration (like 60s, 5m, 1h, or seconds), got "${value}"`);
    return 0;
  }
}

const VARIABLES = {
  url: 'COMPLIANCE_URL',
  apiKey: 'COMPLIANCE_API_KEY',
  apiKeyHeader: 'COMPLIANCE_API_KEY_HEADER',
  username: 'COMPLIANCE_USERNAME',
  password: 'COMPLIANCE_PASSWORD',
} as const;
const FIELDS = { url: 'url', apiKey: 'apiKey', apiKeyHeader: 'apiKeyHeader', username: 'username', password: 'password' } as const;

/**
 * The gate's settings from its variables and each brand's `compliance` entry (`brandEntries`: brand id
 * -> the entry), or undefined when neither names an endpoint: then there is no gate. A brand's entry
 * without a url reads COMPLIANCE_URL; its credential, when it gives none, is COMPLIANCE_URL's only
 * there (never sent to another host). Problems are pushed on `problems`.
 */
export function complianceSettingsOf(raw: ComplianceRaw, brandEntries: ReadonlyMap<string, unknown>, problems: string[]): ComplianceSettings | undefined {
  const found: string[] = [];
  let defaultEndpoint: ComplianceEndpoint | undefined;
  const defaultCredential = credentialOf(
    { apiKey: raw.COMPLIANCE_API_KEY, apiKeyHeader: raw.COMPLIANCE_API_KEY_HEADER, username: raw.COMPLIANCE_USERNAME, password: raw.COMPLIANCE_PASSWORD },
    'compliance credentials',
    VARIABLES,
    found,
  );
  if (raw.COMPLIANCE_URL) {
    const problem = urlProblem(raw.COMPLIANCE_URL);
    if (problem) found.push(`COMPLIANCE_URL ${problem}`);
    else defaultEndpoint = { url: raw.COMPLIANCE_URL.replace(/\/+$/, ''), ...(defaultCredential && { credential: defaultCredential }) };
  } else if (defaultCredential) {
    found.push(`compliance credentials: ${defaultCredential.kind === 'api-key' ? 'COMPLIANCE_API_KEY' : 'COMPLIANCE_USERNAME'} is set without COMPLIANCE_URL`);
  }

  const brands = new Map<string, ComplianceEndpoint>();
  for (const [brandId, entry] of brandEntries) {
    const what = `PUSH_CREDENTIALS_FILE brand ${brandId} compliance`;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      found.push(`${what} must be an object of url, apiKey, apiKeyHeader, username, password`);
      continue;
    }
    const fields = entry as EndpointFields;
    const unknown = Object.keys(fields).filter((key) => !(key in FIELDS));
    if (unknown.length) found.push(`${what}: unknown field ${unknown.join(', ')}`);
    const own = credentialOf(fields, what, FIELDS, found);
    if (fields.url !== undefined && (typeof fields.url !== 'string' || !fields.url)) {
      found.push(`${what}: url must be a non-empty string`);
      continue;
    }
    if (typeof fields.url === 'string') {
      const problem = urlProblem(fields.url);
      if (problem) found.push(`${what}: url ${problem}`);
      else brands.set(brandId, { url: fields.url.replace(/\/+$/, ''), ...(own && { credential: own }) });
    } else if (defaultEndpoint) {
      brands.set(brandId, { url: defaultEndpoint.url, ...((own ?? defaultEndpoint.credential) && { credential: own ?? defaultEndpoint.credential }) });
    } else if (raw.COMPLIANCE_URL === '') {
      found.push(`${what}: set url (COMPLIANCE_URL is not set)`);
    }
  }

  const cacheTtlMs = duration('COMPLIANCE_CACHE_TTL', raw.COMPLIANCE_CACHE_TTL, found);
  const maxWaitMs = duration('COMPLIANCE_MAX_WAIT', raw.COMPLIANCE_MAX_WAIT, found);
  if (raw.COMPLIANCE_MAX_WAIT.trim() && maxWaitMs === 0 && !found.some((problem) => problem.startsWith('COMPLIANCE_MAX_WAIT'))) {
    found.push('COMPLIANCE_MAX_WAIT must be longer than 0');
  }
  problems.push(...found);
  if (found.length || (!defaultEndpoint && brands.size === 0)) return undefined;
  const extra = splitList(raw.COMPLIANCE_BLOCK_TYPES).map((type) => type.toLowerCase());
  return {
    ...(defaultEndpoint && { default: defaultEndpoint }),
    brands,
    blockTypes: [...new Set(['blocked', ...extra.filter((type) => type !== 'excluded')])],
    consentDefault: raw.COMPLIANCE_CONSENT_DEFAULT,
    cacheTtlMs,
    maxWaitMs,
    concurrency: raw.COMPLIANCE_CONCURRENCY,
    timeoutMs: raw.COMPLIANCE_TIMEOUT_MS,
  };
}

/** The variables holding secrets, kept out of a loaded configuration (which may be logged). */
export const COMPLIANCE_SECRET_VARIABLES = ['COMPLIANCE_API_KEY', 'COMPLIANCE_PASSWORD'] as const;
