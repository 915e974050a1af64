import type { LogSink } from '@operator/config';
import { Redis, type RedisOptions } from 'ioredis';

export { Redis };
export type { RedisOptions };

/**
 * A connection for code that answers requests: commands fail at once while Redis is down (the
 * gateway answers 503 and the CRM retries) instead of piling up in memory.
 */
export function createProducerRedis(url: string, options: RedisOptions = {}, log?: LogSink): Redis {
  return watched(
    new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: 5000,
      connectTimeout: 3000,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
      lazyConnect: false,
      ...options,
    }),
    log,
  );
}

/** A connection for workers: they wait for Redis to come back rather than fail. */
export function createWorkerRedis(url: string, options: RedisOptions = {}, log?: LogSink): Redis {
  return watched(
    new Redis(url, {
      maxRetriesPerRequest: null,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
      ...options,
    }),
    log,
  );
}

export function redisReady(redis: Redis): boolean {
  return redis.status === 'ready';
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const CONNECTION_MESSAGES = /connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE/i;

function isConnectionLoss(error: Error & { code?: unknown }): boolean {
  return (typeof error.code === 'string' && CONNECTION_CODES.has(error.code)) || CONNECTION_MESSAGES.test(error.message);
}

const listeners = new WeakMap<Redis, (error: Error) => void>();

/**
 * Gives the connection its error listener (without one, a dropped connection is an unhandled
 * 'error'). ioredis reconnects by itself and reports every failed attempt; the loss is logged once,
 * and its end once, per outage.
 */
function watched(redis: Redis, log: LogSink | undefined): Redis {
  let reported = false;
  const listener = (error: Error & { code?: unknown }) => {
    if (!isConnectionLoss(error)) {
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

/**
 * The 'error' listener for a BullMQ queue or worker on `redis`: they report the losses of their
 * connections (and of the connections they open from it) too, and those join the connection's
 * own report, so that an outage is logged once.
 */
export function redisErrorListener(redis: Redis): (error: Error) => void {
  return listeners.get(redis) ?? listeners.get(watched(redis, undefined))!;
}
