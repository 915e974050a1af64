import { Type } from '@sinclair/typebox';
import { sharedTuningField } from './push-tuning';

// Settings every process shares, one schema per concern.

/** Unset is development; any other value is refused at boot, so a `prod` never passes for development. */
export const NODE_ENVS = ['development', 'test', 'production'] as const;
export type NodeEnv = (typeof NODE_ENVS)[number];

export function nodeEnvOf(env: Record<string, string | undefined>): NodeEnv | undefined {
  const value = env.NODE_ENV || 'development';
  return (NODE_ENVS as readonly string[]).includes(value) ? (value as NodeEnv) : undefined;
}

export const RuntimeEnv = Type.Object({
  NODE_ENV: Type.Union(
    NODE_ENVS.map((name) => Type.Literal(name)),
    { default: 'development', description: 'development (the default), test or production; production turns on the production checks' },
  ),
  LOG_LEVEL: Type.String({ default: 'info', description: 'fatal, error, warn, info, debug, trace or silent' }),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({
    default: 25000,
    minimum: 100,
    description: 'On SIGTERM, how long the process may take to finish its work in flight before it gives its claims back and exits',
  }),
});

export const DatabaseEnv = Type.Object({
  DATABASE_URL: Type.String({ default: 'postgresql://postgres@127.0.0.1:5432/operator_api', description: 'PostgreSQL URL' }),
  DATABASE_POOL_SIZE: Type.Integer({ default: 10, minimum: 1, description: 'Connections per process' }),
});

/**
 * A URL listing several hosts (libpq's `h1,h2` or `?host=h1,h2`) is refused in one line:
 * node-postgres connects to one host, and would fail in a way taken for an outage.
 */
export function multiHostProblem(name: string, url: string, instead = PRIMARY_ADDRESSES): string | undefined {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url)?.[1] ?? '';
  const hosts = authority.slice(authority.lastIndexOf('@') + 1);
  const query = url.includes('?') ? url.slice(url.indexOf('?') + 1).split('#')[0] : '';
  const hostParameter = new URLSearchParams(query).get('host') ?? '';
  if (!hosts.includes(',') && !hostParameter.includes(',')) return undefined;
  return `${name} lists several hosts, and the PostgreSQL driver connects to one: ${instead}`;
}

const PRIMARY_ADDRESSES = "give one address that always reaches the primary (PgBouncer, HAProxy with Patroni, CloudNativePG's -rw Service, a managed database's writer endpoint)";
const REPLICA_ADDRESSES = "give one address that reaches a replica (PgBouncer or HAProxy in front of the replicas, CloudNativePG's -ro Service, a managed database's reader endpoint)";

export function databaseProblems(env: { DATABASE_URL: string }): string[] {
  const problem = multiHostProblem('DATABASE_URL', env.DATABASE_URL);
  return problem ? [problem] : [];
}

/** Where reads that may lag a little go: a hot standby, or a pooler in front of several. */
export const ReadDatabaseEnv = Type.Object({
  DATABASE_READ_URL: Type.String({
    default: '',
    description: 'PostgreSQL URL of a replica for the reads that may lag (status polling, the events feed, listings, back-office reads, store gauges); empty: DATABASE_URL',
  }),
});

/** Never quoted: it holds a password. */
export function readDatabaseProblems(env: { DATABASE_READ_URL: string }): string[] {
  const url = env.DATABASE_READ_URL;
  if (!url) return [];
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  if (!parsed || !/^postgres(ql)?:$/.test(parsed.protocol) || (!parsed.hostname && !parsed.searchParams.get('host'))) {
    return ['DATABASE_READ_URL must be a postgresql:// URL with a host (or empty, to read from DATABASE_URL)'];
  }
  const problem = multiHostProblem('DATABASE_READ_URL', url, REPLICA_ADDRESSES);
  return problem ? [problem] : [];
}

export function readDatabaseUrl(env: { DATABASE_URL: string; DATABASE_READ_URL: string }): string {
  return env.DATABASE_READ_URL || env.DATABASE_URL;
}

/**
 * The operations port: every app's /metrics, /health/live and /health/ready. The gateway's in
 * production only, with /docs, /openapi.json and the queue dashboard; elsewhere it serves them on PORT.
 */
export const MetricsEnv = Type.Object({
  METRICS_PORT: Type.Integer({
    default: 9464,
    minimum: 0,
    maximum: 65535,
    description: 'Port of /metrics, /health/live and /health/ready (0: any free port); the gateway opens it in production only, and serves /docs, /openapi.json and the queue dashboard there too',
  }),
});

/** The operator's forward proxy, honoured by every outbound connection but RabbitMQ's; lower-case names read when upper-case are unset. */
export const EgressEnv = Type.Object({
  HTTPS_PROXY: Type.String({ default: '', description: 'Proxy for https connections (http://[user:password@]host:port); empty: direct' }),
  HTTP_PROXY: Type.String({ default: '', description: 'Proxy for plain http connections; empty: direct' }),
  NO_PROXY: Type.String({ default: '', description: 'Hosts reached directly: comma-separated names (subdomains included), addresses, host:port, or * for all' }),
});

export interface EgressSettings {
  httpsProxy?: string;
  httpProxy?: string;
  noProxy?: string;
}

export function egressSettings(raw: { HTTPS_PROXY: string; HTTP_PROXY: string; NO_PROXY: string }, env: Record<string, string | undefined>): { egress: EgressSettings; problems: string[] } {
  const pick = (name: 'HTTPS_PROXY' | 'HTTP_PROXY' | 'NO_PROXY') => raw[name] || env[name.toLowerCase()] || undefined;
  const egress: EgressSettings = { httpsProxy: pick('HTTPS_PROXY'), httpProxy: pick('HTTP_PROXY'), noProxy: pick('NO_PROXY') };
  const problems: string[] = [];
  for (const [name, value] of [['HTTPS_PROXY', egress.httpsProxy], ['HTTP_PROXY', egress.httpProxy]] as const) {
    if (!value) continue;
    const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
    // Never quoted: the URL may hold the proxy's password.
    if (!URL.canParse(text) || !/^https?:$/.test(new URL(text).protocol)) problems.push(`${name} must be an http:// or https:// proxy URL`);
  }
  return { egress, problems };
}

/** https in production: credits and keys must not cross in clear. */
export function outboundUrlProblems(name: string, value: string, nodeEnv: NodeEnv): string[] {
  if (!value) return [];
  if (!URL.canParse(value)) return [`${name} must be a URL`];
  const { protocol } = new URL(value);
  if (protocol !== 'http:' && protocol !== 'https:') return [`${name} must be an http(s) URL`];
  if (nodeEnv === 'production' && protocol !== 'https:') return [`${name} must be https in production`];
  return [];
}

/** How send jobs retry: set on the gateway (which adds the jobs) and on the workers alike (defaults: push-tuning.ts). */
export const PushSendEnv = Type.Object({
  PUSH_SEND_ATTEMPTS: sharedTuningField('sendAttempts'),
  PUSH_SEND_BACKOFF_MS: sharedTuningField('sendBackoffMs'),
});

/** How long settled messages and delivered events are kept (see libs/db/src/retention.ts). */
export const RetentionEnv = Type.Object({
  RETENTION_DAYS: Type.Integer({
    default: 30,
    minimum: 0,
    description: 'Settled messages (with their deliveries) and delivered or dead events older than this many days are purged; 0 keeps them for ever',
  }),
  RETENTION_INTERVAL_MS: Type.Integer({ default: 60000, minimum: 1000, description: 'Pause between looks for rows to purge once none is left' }),
});
