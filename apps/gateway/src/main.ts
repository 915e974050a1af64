import { createLogger, loadGatewayConfig, onShutdown, runMain, urlOrigin } from '@operator/config';
import { closeDb, closeReads, createDb, createReads, startPartitionKeeper } from '@operator/db';
import { MetricsPortError } from '@operator/metrics';
import { closePushQueues, createProducerRedis, createPushQueues } from '@operator/queue';
import { buildApp, buildOperationsApp } from './app';
import { listenOperations, operationsApart } from './operations';

async function main() {
  const config = loadGatewayConfig();
  const log = createLogger('gateway', config.LOG_LEVEL);
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  // Status polling, the feed, listings and back-office reads, the gauges: on a replica when DATABASE_READ_URL names one.
  const reads = createReads(db, { url: config.DATABASE_READ_URL, primaryUrl: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, label: urlOrigin(config.DATABASE_READ_URL), log });
  if (reads.separate) log.info({ readReplica: urlOrigin(config.DATABASE_READ_URL) }, 'reads that may lag go to the replica of DATABASE_READ_URL');
  // A Redis outage is answered with 503 per request; it does not stop the process.
  const redis = createProducerRedis(config.redis, {}, log);
  const queues = createPushQueues(redis, config.QUEUE_PREFIX);
  const partitions = startPartitionKeeper({ db, log });
  const app = buildApp({ config, db, reads, redis, queues }, true);
  const operations = operationsApart(config) ? buildOperationsApp({ config, db, reads, redis, queues, api: app }, true) : undefined;

  // The gateway holds no claims: past the deadline there is nothing to give back.
  onShutdown({
    log,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    close: async () => {
      // New requests are answered 503 from here on (and readiness with them); those in flight finish.
      await app.close();
      // The operations port closes last, so the last scrapes still see the shutdown.
      await operations?.close();
      await partitions.stop();
      await closePushQueues(queues).catch(() => undefined);
      redis.disconnect();
      await closeReads(reads);
      await closeDb(db);
    },
  });

  if (operations) await listenOperations(operations, config);
  await partitions.firstLook;
  await app.listen({ host: config.HOST, port: config.PORT });
}

runMain(main, MetricsPortError);
