import { Redis, type RedisOptions } from 'ioredis';

export { Redis };
export type { RedisOptions };

/**
 * A connection for code that answers requests: commands fail at once while Redis is down (the
 * gateway answers 503 and the CRM retries) instead of piling up in memory.
 */
export function createProducerRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 5000,
    connectTimeout: 3000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    lazyConnect: false,
    ...options,
  });
}

/** A connection for workers: they wait for Redis to come back rather than fail. */
export function createWorkerRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: null,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    ...options,
  });
}

export function redisReady(redis: Redis): boolean {
  return redis.status === 'ready';
}
