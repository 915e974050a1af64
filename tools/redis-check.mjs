// `npm start` checks Redis before it starts the apps, so a newcomer without it reads one line that
// says where it looked and how to start it, rather than every app's reconnect warnings.
import { Redis } from 'ioredis';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Answers null when Redis at `url` answers PING within `timeoutMs`, else what went wrong, in a line. */
export async function redisProblem(url, timeoutMs = 3000) {
  let target;
  try {
    target = new URL(url);
  } catch {
    return `REDIS_URL is not a URL: set it like ${DEFAULT_REDIS_URL}`;
  }
  const where = `${target.hostname || '127.0.0.1'}:${target.port || 6379}`;
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  let cause;
  redis.on('error', (error) => {
    // Reported below, in one line: the socket's error says more than the closed connection's.
    cause ??= error;
  });
  try {
    await redis.connect();
    await redis.ping();
    return null;
  } catch (thrown) {
    const error = cause ?? thrown;
    const said = /NOAUTH|WRONGPASS|invalid password/i.test(error.message) ? `it refused the credentials in REDIS_URL: ${error.message}` : error.code ?? error.message;
    return `Redis is not reachable at ${where} (${said}): start it (with Docker: docker compose up -d redis) or set REDIS_URL`;
  } finally {
    redis.disconnect();
  }
}

/** redisProblem for a command line: a problem ends the process with one line. */
export async function ensureRedisOrExit(url) {
  const problem = await redisProblem(url);
  if (problem) {
    console.error(problem);
    process.exit(1);
  }
}
