import type { Credentials, Logger, PushWorkerConfig } from '@operator/config';
import type { ProviderName } from '@operator/contract';
import { closeDb, createDb } from '@operator/db';
import { createProviderRegistry, createSandboxProvider, type PushProvider } from '@operator/providers';
import { startMetricsServer, watchStores } from '@operator/metrics';
import { closePushQueues, createProducerRedis, createPushQueues, createSendWorker, createWorkerRedis, queueJobCounts, redisErrorListener } from '@operator/queue';
import { createSendRecorder } from './outcomes';
import { startReconciler } from './reconcile';
import { processSendJob } from './send';

/** A running send worker: the app calls `close` on shutdown, and `abandon` if `close` misses its deadline. */
export interface PushWorker {
  /** Finishes the jobs in flight and closes the worker's clients, the metrics server last. */
  close(): Promise<void>;
  /** Gives back the claims of deliveries not sent yet. */
  abandon(): Promise<void>;
}

/**
 * Starts one provider's send worker. `createClient` makes the provider client for one credential.
 * /metrics, /health/live and /health/ready answer on METRICS_PORT, readiness while PostgreSQL and
 * Redis do; a port in use throws MetricsPortError.
 */
export async function startPushWorker<P extends ProviderName>(
  provider: P,
  config: PushWorkerConfig<P>,
  log: Logger,
  createClient: (credential: Credentials[P], label: string) => PushProvider,
): Promise<PushWorker> {
  if (config.sandbox) {
    log.warn(
      { provider },
      `SANDBOX: no ${provider} credentials are configured, so pushes are NOT delivered to devices: each send is accepted here and recorded as sent. Configure credentials before real use; production refuses to start like this.`,
    );
  }
  const registry = createProviderRegistry<Credentials[P]>({
    name: provider,
    defaultCredential: config.credentials.default,
    brandCredentials: config.credentials.brands,
    create: createClient,
    sandbox: config.sandbox ? createSandboxProvider(provider, (send) => log.info({ pushId: send.pushId }, 'sandbox: push accepted')) : undefined,
  });
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  const redis = createWorkerRedis(config.REDIS_URL, {}, log);
  const recorder = createSendRecorder({ db, log, leaseMs: config.PUSH_CLAIM_LEASE_MS });
  // The reconciler enqueues through a connection that fails fast: a pass with Redis down is simply tried again later.
  const producer = createProducerRedis(config.REDIS_URL, {}, log);
  const queues = createPushQueues(producer, config.QUEUE_PREFIX);
  const metrics = await startMetricsServer({
    port: config.METRICS_PORT,
    // Asked through the connection that fails fast: the worker's own waits for Redis to come back.
    checks: { postgres: () => db.pool.query('SELECT 1'), redis: () => producer.ping() },
    stores: watchStores({ queueJobs: () => queueJobCounts([queues[provider]]) }, { log }),
  });
  const reconciler = startReconciler({
    db,
    queues,
    provider,
    log,
    intervalMs: config.PUSH_RECONCILE_INTERVAL_MS,
    afterMs: config.PUSH_RECONCILE_AFTER_MS,
    leaseMs: config.PUSH_CLAIM_LEASE_MS,
    jobMaxMessages: 100,
    sendPolicy: { attempts: config.PUSH_SEND_ATTEMPTS, backoffMs: config.PUSH_SEND_BACKOFF_MS },
  });

  const worker = createSendWorker(
    provider,
    (run) =>
      processSendJob(
        {
          db,
          provider,
          providerFor: (brandId) => registry.providerFor(brandId),
          log,
          recorder,
          leaseMs: config.PUSH_CLAIM_LEASE_MS,
          visibilityGraceMs: 30000,
          parallelMessages: config.PUSH_WORKER_PARALLEL_MESSAGES,
          trackingSecret: config.TRACKING_SECRET,
        },
        run,
      ),
    { connection: redis, prefix: config.QUEUE_PREFIX, concurrency: config.PUSH_WORKER_CONCURRENCY, backoffMs: config.PUSH_SEND_BACKOFF_MS, log },
  );
  worker.on('failed', (job, error) => log.warn({ jobId: job?.id, attempts: job?.attemptsMade, reason: error.message }, 'send job attempt failed'));
  worker.on('error', redisErrorListener(redis));
  log.info({ provider, concurrency: config.PUSH_WORKER_CONCURRENCY, sandbox: config.sandbox, metricsPort: metrics.port }, 'push worker started');

  return {
    close: async () => {
      metrics.shuttingDown();
      await reconciler.stop();
      // Waits for the jobs in flight, then for their outcomes to be recorded.
      await worker.close();
      await recorder.close();
      await closePushQueues(queues).catch(() => undefined);
      producer.disconnect();
      await registry.close();
      await closeDb(db);
      await redis.quit().catch(() => redis.disconnect());
      await metrics.close();
    },
    abandon: async () => {
      await recorder.release();
    },
  };
}
