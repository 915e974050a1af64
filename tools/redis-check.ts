// What `npm start` asks of Redis before it starts the apps, through the same settings and the same
// client as the apps (REDIS_URL, or the Sentinels, or the Cluster): one line saying where it looked
// and how to fix it, rather than every app's reconnect warnings. tools/redis-check.mjs bundles it.
import { describeRedis, redisConnectionOf, type Env } from '@operator/config';
import { createProducerRedis, redisServer, type RedisClient } from '@operator/queue';

const HOW: Record<string, string> = {
  standalone: 'start it (redis-server, or with Docker: docker run -d -p 127.0.0.1:6379:6379 redis:7) or set REDIS_URL',
  sentinel: 'start them or set REDIS_SENTINELS and REDIS_SENTINEL_NAME',
  cluster: 'start it or set REDIS_CLUSTER_NODES',
};

function connected(redis: RedisClient, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(Object.assign(new Error('no answer'), { code: 'ETIMEDOUT' })), timeoutMs + 1000);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
    redis.once('end', () => {
      clearTimeout(timer);
      reject(new Error('connection closed'));
    });
  });
}

function said(error: Error & { code?: string }): string {
  if (/NOAUTH|WRONGPASS|invalid password/i.test(error.message)) return `it refused the credentials (REDIS_URL or REDIS_PASSWORD): ${error.message}`;
  // Unreachable, or not monitoring that name: ioredis says the same of both.
  if (/All sentinels are unreachable/.test(error.message)) return 'no Sentinel named the master';
  // Unreachable, or not in cluster mode.
  if (/None of startup nodes is available|Failed to refresh slots cache/.test(error.message)) return 'no node gave the slot map';
  return error.code ?? error.message;
}

/** Null when the Redis the environment describes answers as a master within `timeoutMs`, else what went wrong, in a line. */
export async function redisProblem(env: Env, timeoutMs = 3000): Promise<string | null> {
  const { connection, problems } = redisConnectionOf(env);
  if (problems.length) return `Redis is not configured right: ${problems.join('; ')}`;
  const where = connection.mode === 'standalone' ? `at ${describeRedis(connection)}` : connection.mode === 'sentinel' ? `as the ${describeRedis(connection)}` : `as ${describeRedis(connection)}`;
  // A few quick attempts, so that one lost on a busy machine (a slot map read late) is no verdict.
  const attempts = (attempt: number) => (attempt <= 3 ? 200 : null);
  const redis = createProducerRedis(connection, { connectTimeout: timeoutMs, retryStrategy: attempts, sentinelRetryStrategy: attempts });
  let cause: Error | undefined;
  // Reported below, in one line: the first error says more than the closed connection's.
  redis.on('error', (error: Error) => void (cause ??= error));
  try {
    await connected(redis, timeoutMs);
    const server = await redisServer(redis);
    if (server.role !== 'master') return `Redis ${where} answers from a replica (${server.address}), which refuses writes: point the settings at the master`;
    return null;
  } catch (thrown) {
    return `Redis is not reachable ${where} (${said((cause ?? thrown) as Error)}): ${HOW[connection.mode]}`;
  } finally {
    redis.disconnect();
  }
}
