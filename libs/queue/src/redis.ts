import { formatAddress, type LogSink, type RedisConnection, type RedisMode } from '@operator/config';
import { StoreServer } from '@operator/readiness';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

export { Cluster, Redis };
export type { RedisOptions };

/** One server, a master named by Sentinel, or a Cluster. */
export type RedisClient = Redis | Cluster;

/**
 * A connection for code that answers requests: commands fail at once while Redis is down or
 * failing over (the gateway answers 503 and the CRM retries) instead of piling up in memory.
 */
export function createProducerRedis(connection: RedisConnection, options: RedisOptions = {}, log?: LogSink): RedisClient {
  const client = createClient(connection, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 5000,
    connectTimeout: 3000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    lazyConnect: false,
    // Refused, and the connection made again: the CRM retries the request. Sending the command
    // again by itself could take it out of the pipeline it belongs to (enqueueSendJobs' addBulk).
    reconnectOnError: (error) => (holdsReplica(error) ? 1 : false),
    ...options,
  }, {
    // Four tries refuse a request within about half a second while the slot map is fetched anew.
    maxRedirections: 4,
  });
  return watched(client, log);
}

/** A connection for workers: they wait for Redis to come back rather than fail. */
export function createWorkerRedis(connection: RedisConnection, options: RedisOptions = {}, log?: LogSink): RedisClient {
  const client = createClient(connection, {
    maxRetriesPerRequest: null,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    // Sent again once connected to the master: a worker's commands are single scripts and
    // blocking pops, never part of a MULTI, and the worker does not see the failover.
    reconnectOnError: (error) => (holdsReplica(error) ? 2 : false),
    ...options,
  });
  return watched(client, log);
}

/**
 * The server answers as a replica after a failover this connection stayed through. Connecting again
 * asks the Sentinels for the master, or resolves a managed Redis's name again.
 */
function holdsReplica(error: Error): boolean {
  return /\bREADONLY\b/.test(error.message) || /^UNBLOCKED\b.*(master|replica|slave)/i.test(error.message);
}

/**
 * Connects again when it ends without close(): ioredis ends it for good when its failoverDetector
 * aborts a reconnection on +switch-master, and every command would then fail until a restart.
 */
class SentinelRedis extends Redis {
  private closing = false;

  constructor(options: RedisOptions) {
    super(options as RedisOptions & { replyMapping?: 'legacy' });
    this.on('end', () => {
      if (this.closing) return;
      setTimeout(() => {
        if (!this.closing && this.status === 'end') this.connect().catch(() => undefined);
      }, 200).unref();
    });
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.closing = true;
    super.disconnect(reconnect);
  }

  override quit(callback?: Parameters<Redis['quit']>[0]): ReturnType<Redis['quit']> {
    this.closing = true;
    return super.quit(callback);
  }

  override duplicate: Redis['duplicate'] = (override) => new SentinelRedis({ ...this.options, ...override }) as never;
}

function createClient(connection: RedisConnection, options: RedisOptions, clusterTuning: Partial<ClusterOptions> = {}): RedisClient {
  const access: RedisOptions = {
    ...(connection.username && { username: connection.username }),
    ...(connection.password && { password: connection.password }),
    ...(connection.tls && { tls: {} }),
  };
  switch (connection.mode) {
    case 'standalone':
      return new Redis({ ...connection.address, db: connection.db, ...access, ...options });
    case 'sentinel':
      return new SentinelRedis({
        sentinels: connection.sentinels,
        name: connection.name,
        ...(connection.sentinelPassword && { sentinelPassword: connection.sentinelPassword }),
        // Subscribed to the Sentinels' +switch-master: a failover is followed at once, not when
        // the old master, not yet demoted, has taken writes that its resync will throw away.
        failoverDetector: true,
        sentinelRetryStrategy: (attempt) => Math.min(attempt * 200, 2000),
        db: connection.db,
        ...access,
        ...options,
      });
    case 'cluster': {
      // A node answers MOVED, not READONLY, for the slots its master took over: the Cluster client follows that.
      const { enableOfflineQueue, retryStrategy, reconnectOnError: _notForNodes, ...nodeOptions } = options;
      const clusterOptions: ClusterOptions = {
        ...(enableOfflineQueue !== undefined && { enableOfflineQueue }),
        ...(retryStrategy && { clusterRetryStrategy: (attempt) => retryStrategy(attempt) ?? null }),
        slotsRefreshTimeout: 2000,
        // The ready check leaves connect() unsettled for good while the cluster is down (a replica
        // taking over), and BullMQ's worker would wait on it forever; without it, CLUSTERDOWN retries.
        enableReadyCheck: false,
        redisOptions: { ...access, ...nodeOptions },
        // Managed clusters announce names their certificates are made out to: TLS checks the name, not an address.
        ...(connection.tls && { dnsLookup: (address, callback) => callback(null, address) }),
        ...clusterTuning,
      };
      return new Cluster(connection.nodes, clusterOptions);
    }
  }
}

export function redisReady(redis: RedisClient): boolean {
  return redis.status === 'ready';
}

function modeOf(redis: RedisClient): RedisMode {
  if (redis instanceof Cluster) return 'cluster';
  return redis.options.sentinels ? 'sentinel' : 'standalone';
}

/** Which Redis a connection reaches and whether it can write there (readiness reports it). */
export interface RedisServer {
  mode: RedisMode;
  /** `replica`: a failover not followed yet. */
  role: 'master' | 'replica';
  /** The masters' in a Cluster. */
  address: string;
}

/** ROLE, or a Cluster's state (`ok` when every slot has a master); rejects when Redis does not answer. */
export async function redisServer(redis: RedisClient): Promise<RedisServer> {
  if (redis instanceof Cluster) {
    const info = String(await redis.cluster('INFO'));
    const state = /cluster_state:(\w+)/.exec(info)?.[1];
    if (state !== 'ok') throw new Error(`the Redis Cluster is in state ${state ?? 'unknown'}`);
    const masters = redis.nodes('master').map((node) => formatAddress({ host: String(node.options.host), port: Number(node.options.port) }));
    return { mode: 'cluster', role: 'master', address: masters.sort().join(',') };
  }
  const [role] = (await redis.call('ROLE')) as [string];
  const socket = redis.stream;
  const address = socket?.remoteAddress ? formatAddress({ host: socket.remoteAddress, port: socket.remotePort ?? 0 }) : 'unknown';
  return { mode: modeOf(redis), role: role === 'master' ? 'master' : 'replica', address };
}

/** Usable for the app only as a master. */
export async function redisReadiness(redis: RedisClient): Promise<StoreServer> {
  const server = await redisServer(redis);
  return new StoreServer(server.role === 'master', server);
}

// What a connection reports while Redis is away, failing over, or answering from a replica. A MOVED
// or ASK that reaches the caller is a slot whose master is changing.
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const CONNECTION_MESSAGES =
  /connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|All sentinels are unreachable|None of startup nodes is available|Failed to refresh slots cache|Cluster is disconnected|Too many Cluster redirections|^CLUSTERDOWN|^TRYAGAIN|^MOVED |^ASK |\bREADONLY\b|^UNBLOCKED/i;

export function isConnectionLoss(error: Error & { code?: unknown }): boolean {
  return (typeof error.code === 'string' && CONNECTION_CODES.has(error.code)) || CONNECTION_MESSAGES.test(error.message);
}

// BullMQ's answer when a worker finishes a job no longer its own (a reply lost to a reconnection, or
// a lapsed lock): the job is not lost either way.
const JOB_NO_LONGER_HELD = /^(Missing lock for job|Lock mismatch for job|Missing key for job|Job \S+ is not in the \w+ state)\b/;

export function isJobNoLongerHeld(error: Error): boolean {
  return JOB_NO_LONGER_HELD.test(error.message);
}

const listeners = new WeakMap<RedisClient, (error: Error) => void>();

/** Without an error listener a dropped connection is an unhandled 'error'; an outage is logged once. */
function watched(redis: RedisClient, log: LogSink | undefined): RedisClient {
  let reported = false;
  const listener = (error: Error & { code?: unknown }) => {
    if (isJobNoLongerHeld(error)) {
      log?.warn({ err: error.message }, 'a job was no longer held by this worker when it finished (a reply lost to a reconnection, or a lapsed lock)');
    } else if (!isConnectionLoss(error)) {
      log?.error({ err: error }, 'Redis or queue error');
    } else if (!reported) {
      reported = true;
      log?.warn({ store: 'redis', err: error.message, code: error.code }, 'Redis connection lost; reconnecting');
    }
  };
  redis.on('error', listener);
  redis.on('ready', () => {
    if (reported) log?.info({ store: 'redis' }, 'Redis connection is back');
    reported = false;
  });
  listeners.set(redis, listener);
  return redis;
}

/** For a BullMQ queue or worker on `redis`, so their reports of an outage join the connection's own. */
export function redisErrorListener(redis: RedisClient): (error: Error) => void {
  return listeners.get(redis) ?? listeners.get(watched(redis, undefined))!;
}
