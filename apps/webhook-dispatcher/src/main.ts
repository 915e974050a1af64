// Delivers the outbox's events to the CRM: push statuses to CRM_STATUS_WEBHOOK_URL, bonus and
// balance events to CRM_EVENTS_BASE_URL or, with CRM_EVENTS_TRANSPORT=rabbitmq, to its RabbitMQ.
// Several instances may run; each event goes out until an answer accepts it, in order per key. It
// also purges messages and events past RETENTION_DAYS.
import { createLogger, loadDispatcherConfig, onShutdown, runMain, urlOrigin } from '@operator/config';
import { closeDb, closeReads, countDeadLetters, createDb, createReads, pingDb, PUSH_STATUS_TOPIC, readOutboxBacklog, startPartitionKeeper, startRetention } from '@operator/db';
import { MetricsPortError, startMetricsServer, STORE_READ_TIMEOUT_MS, watchStores } from '@operator/metrics';
import { createAmqpPublisher, createDispatcher } from '@operator/webhooks';

async function main() {
  const config = loadDispatcherConfig();
  const log = createLogger('webhook-dispatcher', config.LOG_LEVEL);
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  // Only the gauges read there: two connections are plenty.
  const reads = createReads(db, { url: config.DATABASE_READ_URL, primaryUrl: config.DATABASE_URL, poolSize: 2, label: urlOrigin(config.DATABASE_READ_URL), log });
  const amqp =
    config.CRM_EVENTS_TRANSPORT === 'rabbitmq'
      ? createAmqpPublisher({ url: config.CRM_EVENTS_AMQP_URL, exchange: config.CRM_EVENTS_AMQP_EXCHANGE, log, timeoutMs: config.WEBHOOK_TIMEOUT_MS })
      : undefined;
  const eventsBase = amqp ? '' : config.CRM_EVENTS_BASE_URL.replace(/\/+$/, '');
  const urls = {
    [PUSH_STATUS_TOPIC]: config.CRM_STATUS_WEBHOOK_URL || undefined,
    bonus: eventsBase ? `${eventsBase}/v1/integration/bonus` : undefined,
    balance: eventsBase ? `${eventsBase}/v1/integration/user/balances` : undefined,
  };
  const metrics = await startMetricsServer({
    port: config.METRICS_PORT,
    checks: { postgres: () => pingDb(db), ...(amqp && { rabbitmq: () => amqp.check() }) },
    stores: watchStores(
      {
        outbox: () => reads.run((replica) => readOutboxBacklog(replica, Object.keys(urls), STORE_READ_TIMEOUT_MS)),
        deadLetters: () => reads.run((replica) => countDeadLetters(replica, STORE_READ_TIMEOUT_MS)),
      },
      { log },
    ),
  });
  const dispatcher = createDispatcher({
    db,
    log,
    urls,
    publishers: amqp && { bonus: amqp.publishAs('BONUS'), balance: amqp.publishAs('USER_BALANCES_UPDATE') },
    secret: config.CRM_WEBHOOK_SECRET,
    auth: {
      basic: config.CRM_WEBHOOK_USERNAME ? { username: config.CRM_WEBHOOK_USERNAME, password: config.CRM_WEBHOOK_PASSWORD } : undefined,
      apiKey: config.CRM_WEBHOOK_API_KEY ? { header: config.CRM_WEBHOOK_API_KEY_HEADER, value: config.CRM_WEBHOOK_API_KEY } : undefined,
    },
    statusFormat:
      config.CRM_STATUS_WEBHOOK_FORMAT === 'conversion' ? { format: 'conversion', deliveredOn: config.CRM_CONVERSION_DELIVERED_ON } : { format: 'event' },
    statusBatchMax: config.CRM_STATUS_WEBHOOK_BATCH_MAX,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    proxy: config.egress,
    concurrency: config.WEBHOOK_CONCURRENCY,
    pipelining: config.WEBHOOK_PIPELINING,
    batchSize: config.WEBHOOK_BATCH_SIZE,
    leaseMs: Math.max(30000, config.WEBHOOK_TIMEOUT_MS * 3),
    maxAgeMs: config.maxAgeMs,
    backoffMs: config.WEBHOOK_BACKOFF_MS,
    maxBackoffMs: config.WEBHOOK_MAX_BACKOFF_MS,
    idleMs: config.WEBHOOK_POLL_MS,
  });
  if (!config.CRM_STATUS_WEBHOOK_URL) log.info({}, 'CRM_STATUS_WEBHOOK_URL is not set: push statuses are available by polling only');
  // Production refuses this (see loadDispatcherConfig); a local receiver may do without.
  if (config.CRM_STATUS_WEBHOOK_FORMAT === 'conversion' && !config.CRM_WEBHOOK_USERNAME) {
    log.warn({}, "CRM_WEBHOOK_USERNAME and CRM_WEBHOOK_PASSWORD are not set: the CRM's conversion endpoint refuses posts without Basic auth");
  }
  if (!eventsBase && !amqp) log.info({}, 'CRM_EVENTS_BASE_URL is not set: bonus and balance events wait in the outbox');
  dispatcher.start();
  // The day partitions are made ahead here too (libs/db/src/partitions.ts), and dropped by retention.
  const partitions = startPartitionKeeper({ db, log });
  // Without a status webhook the push statuses are only polled: they age out of the feed too.
  const retention = startRetention({
    db,
    log,
    retentionDays: config.RETENTION_DAYS,
    intervalMs: config.RETENTION_INTERVAL_MS,
    feedOnly: !config.CRM_STATUS_WEBHOOK_URL,
  });
  // By origin only: the URLs may carry credentials, in their user info, path or query.
  log.info(
    { statusUrl: urlOrigin(config.CRM_STATUS_WEBHOOK_URL), statusFormat: config.CRM_STATUS_WEBHOOK_FORMAT, statusBatchMax: config.CRM_STATUS_WEBHOOK_BATCH_MAX, eventsTransport: config.CRM_EVENTS_TRANSPORT, eventsBase: urlOrigin(eventsBase), readReplica: reads.separate ? urlOrigin(config.DATABASE_READ_URL) : undefined, metricsPort: metrics.port },
    'webhook dispatcher started',
  );

  onShutdown({
    log,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    close: async () => {
      metrics.shuttingDown();
      await Promise.all([dispatcher.stop(), retention.stop(), partitions.stop()]);
      await amqp?.close();
      await closeReads(reads);
      await closeDb(db);
      await metrics.close();
    },
    abandon: async () => {
      await dispatcher.release();
    },
  });
}

runMain(main, MetricsPortError);
