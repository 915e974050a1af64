import { ConfigError, loadGatewayConfig } from '@operator/config';
import { closeDb, createDb } from '@operator/db';
import { closePushQueues, createProducerRedis, createPushQueues } from '@operator/queue';
import { buildApp } from './app';

async function main() {
  const config = loadGatewayConfig();
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE });
  const redis = createProducerRedis(config.REDIS_URL);
  // A Redis outage is answered with 503 per request; it must not stop the process.
  redis.on('error', () => undefined);
  const queues = createPushQueues(redis, config.QUEUE_PREFIX);
  const app = buildApp({ config, db, redis, queues }, true);

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing requests in flight');
    await app.close();
    await closePushQueues(queues).catch(() => undefined);
    redis.disconnect();
    await closeDb(db);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  await app.listen({ host: config.HOST, port: config.PORT });
}

main().catch((error) => {
  if (error instanceof ConfigError) console.error(error.message);
  else console.error(error);
  process.exit(1);
});
