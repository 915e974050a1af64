import { createLogger, loadGatewayConfig, onShutdown, runMain } from '@operator/config';
import { closeDb, createDb } from '@operator/db';
import { closePushQueues, createProducerRedis, createPushQueues } from '@operator/queue';
import { buildApp } from './app';

async function main() {
  const config = loadGatewayConfig();
  const log = createLogger('gateway', config.LOG_LEVEL);
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  // A Redis outage is answered with 503 per request; it does not stop the process.
  const redis = createProducerRedis(config.redis, {}, log);
  const queues = createPushQueues(redis, config.QUEUE_PREFIX);
  const app = buildApp({ config, db, redis, queues }, true);

  // The gateway holds no claims: past the deadline there is nothing to give back.
  onShutdown({
    log,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    close: async () => {
      // New requests are answered 503 from here on (and readiness with them); those in flight finish.
      await app.close();
      await closePushQueues(queues).catch(() => undefined);
      redis.disconnect();
      await closeDb(db);
    },
  });

  await app.listen({ host: config.HOST, port: config.PORT });
}

runMain(main);
