import { Type, type Static } from '@sinclair/typebox';
import { ConfigError, splitList, type Env } from './env';

// How every process reaches Redis: one server (REDIS_URL), a master found through Sentinel, or a
// Redis Cluster. The variables are read here into one description; libs/queue makes the clients.

export const RedisEnv = Type.Object({
  REDIS_URL: Type.String({
    default: 'redis://127.0.0.1:6379',
    description: 'redis:// or rediss:// (TLS) URL: the address (unless REDIS_SENTINELS or REDIS_CLUSTER_NODES is set), the user, password and database',
  }),
  REDIS_SENTINELS: Type.String({ default: '', description: 'Comma-separated host:port of the Sentinels that name the master (with REDIS_SENTINEL_NAME)' }),
  REDIS_SENTINEL_NAME: Type.String({ default: '', description: 'The master group name the Sentinels monitor' }),
  REDIS_SENTINEL_PASSWORD: Type.String({ default: '', description: 'Password of the Sentinels (none when empty)' }),
  REDIS_CLUSTER_NODES: Type.String({ default: '', description: 'Comma-separated host:port of some nodes of a Redis Cluster' }),
  REDIS_PASSWORD: Type.String({ default: '', description: "Password of the Redis servers; takes the place of REDIS_URL's" }),
  REDIS_TLS: Type.Boolean({ default: false, description: 'TLS to the Redis servers (as rediss:// does), also with Sentinel and Cluster' }),
  QUEUE_PREFIX: Type.String({ default: 'operator', description: 'Prefix of every BullMQ key' }),
});

/** Only redisConnectionOf reads these: the configs hand out `redis` instead. */
export type RedisVariable = Exclude<keyof Static<typeof RedisEnv>, 'QUEUE_PREFIX'>;

export function withoutRedisVariables<T extends Record<RedisVariable, unknown>>(raw: T): Omit<T, RedisVariable> {
  const rest: Record<string, unknown> = { ...raw };
  for (const name of Object.keys(RedisEnv.properties)) if (name !== 'QUEUE_PREFIX') delete rest[name];
  return rest as Omit<T, RedisVariable>;
}

export interface RedisAddress {
  host: string;
  port: number;
}

interface RedisAccess {
  username?: string;
  password?: string;
  /** TLS to the servers that hold the data (never to the Sentinels). */
  tls: boolean;
}

export type RedisConnection =
  | (RedisAccess & { mode: 'standalone'; address: RedisAddress; db: number })
  | (RedisAccess & { mode: 'sentinel'; sentinels: RedisAddress[]; name: string; sentinelPassword?: string; db: number })
  | (RedisAccess & { mode: 'cluster'; nodes: RedisAddress[] });

export type RedisMode = RedisConnection['mode'];

const DEFAULT_PORT = 6379;

export function parseAddress(text: string): RedisAddress | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+)):(\d{1,5})$/.exec(text);
  const port = Number(match?.[3]);
  if (!match || port < 1 || port > 65535) return undefined;
  return { host: match[1] ?? match[2], port };
}

function addressList(name: string, text: string, problems: string[]): RedisAddress[] {
  const items = splitList(text);
  const addresses: RedisAddress[] = [];
  for (const item of items) {
    const address = parseAddress(item);
    if (address) addresses.push(address);
    else problems.push(`${name}: "${item}" is not host:port`);
  }
  if (!items.length) problems.push(`${name} must name at least one host:port`);
  return addresses;
}

export function formatAddress({ host, port }: RedisAddress): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

const decoded = (text: string) => (text ? decodeURIComponent(text) : undefined);

/** REDIS_URL always gives the credentials, database and TLS; the address only without Sentinels or Cluster nodes. */
export function redisConnectionOf(env: Env): { connection: RedisConnection; problems: string[] } {
  const problems: string[] = [];
  const text = (name: RedisVariable) => env[name]?.trim() ?? '';
  const urlText = text('REDIS_URL') || String(RedisEnv.properties.REDIS_URL.default);
  let url: URL | undefined;
  try {
    url = new URL(urlText);
  } catch {
    // Never quoted: it may hold a password.
    problems.push('REDIS_URL must be a redis:// or rediss:// URL');
  }
  if (url && url.protocol !== 'redis:' && url.protocol !== 'rediss:') problems.push('REDIS_URL must be a redis:// or rediss:// URL');
  const dbText = url?.pathname.replace(/^\//, '') ?? '';
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0) problems.push('REDIS_URL: the database (its path) must be a number, like redis://host:6379/0');

  // A word other than these is refused by parseEnv, with the other problems.
  const tlsWord = text('REDIS_TLS').toLowerCase();
  const access: RedisAccess = {
    username: decoded(url?.username ?? ''),
    password: text('REDIS_PASSWORD') || decoded(url?.password ?? ''),
    tls: url?.protocol === 'rediss:' || ['true', '1', 'yes'].includes(tlsWord),
  };
  if (!access.username) delete access.username;
  if (!access.password) delete access.password;

  const sentinels = text('REDIS_SENTINELS');
  const clusterNodes = text('REDIS_CLUSTER_NODES');
  const name = text('REDIS_SENTINEL_NAME');
  let connection: RedisConnection;
  if (sentinels && clusterNodes) problems.push('REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set: set one (Sentinel or Cluster)');
  if (sentinels) {
    if (!name) problems.push('REDIS_SENTINELS is set without REDIS_SENTINEL_NAME, the master group name the Sentinels monitor');
    else if (!/^[A-Za-z0-9._-]+$/.test(name)) problems.push(`REDIS_SENTINEL_NAME must be a master group name (letters, digits, . _ -), got "${name}"`);
    const sentinelPassword = text('REDIS_SENTINEL_PASSWORD');
    connection = { mode: 'sentinel', sentinels: addressList('REDIS_SENTINELS', sentinels, problems), name, db, ...access, ...(sentinelPassword && { sentinelPassword }) };
  } else if (clusterNodes) {
    if (db !== 0) problems.push('REDIS_URL names database ' + db + ', but a Redis Cluster has only database 0');
    connection = { mode: 'cluster', nodes: addressList('REDIS_CLUSTER_NODES', clusterNodes, problems), ...access };
  } else {
    const address = { host: url?.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(url?.port || DEFAULT_PORT) };
    connection = { mode: 'standalone', address, db, ...access };
  }
  if (!sentinels && (name || text('REDIS_SENTINEL_PASSWORD'))) {
    problems.push('REDIS_SENTINEL_NAME and REDIS_SENTINEL_PASSWORD are read only with REDIS_SENTINELS: set it too, or leave them empty');
  }
  return { connection, problems };
}

/** For tests and tools; a bad URL throws ConfigError. */
export function redisUrlConnection(url: string): RedisConnection {
  const { connection, problems } = redisConnectionOf({ REDIS_URL: url });
  if (problems.length) throw new ConfigError(problems);
  return connection;
}

/** Where a connection goes, for logs and messages: never its password. */
export function describeRedis(connection: RedisConnection): string {
  switch (connection.mode) {
    case 'standalone':
      return formatAddress(connection.address);
    case 'sentinel':
      return `master ${connection.name} through the Sentinels ${connection.sentinels.map(formatAddress).join(',')}`;
    case 'cluster':
      return `the Redis Cluster of ${connection.nodes.map(formatAddress).join(',')}`;
  }
}
