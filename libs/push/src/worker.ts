import type { Logger, PushWorkerConfig } from '@operator/config';
import type { ProviderName } from '@operator/contract';
import { closeDb, createDb, pingDb } from '@operator/db';
import { createProviderRegistry, createSandboxProvider, type PushProvider } from '@operator/providers';
import { brandLabeler, startMetricsServer, watchStores } from '@operator/metrics';
import { closePushQueues, createProducerRedis, createPushQueues, createSendWorker, createWorkerRedis, queueJobCounts, redisErrorListener, redisReadiness } from '@operator/queue';
import { createOutageClock } from './outage';
import { createSendRecorder } from './outcomes';
import { startReconciler } from './reconcile';
import { processSendJob, type SendCompliance } from './send';
import { createComplianceGate } from '@operator/compliance';

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
export async function startPushWorker<C>(
  provider: ProviderName,
  config: PushWorkerConfig<C>,
  log: Logger,
  createClient: (credential: C, label: string) => PushProvider,
): Promise<PushWorker> {
  if (config.sandbox) {
    log.warn(
      { provider },
      `SANDBOX: no ${provider} credentials are configured, so pushes are NOT delivered to devices: each send is accepted here and recorded as sent. Configure credentials before real use; production refuses to start like this.`,
    );
  }
  const registry = createProviderRegistry<C>({
    name: provider,
    defaultCredential: config.credentials.default,
    brandCredentials: config.credentials.brands,
    create: createClient,
    sandbox: config.sandbox ? createSandboxProvider(provider, (send) => log.info({ pushId: send.pushId }, 'sandbox: push accepted')) : undefined,
    retryAfterMaxMs: config.PUSH_RETRY_AFTER_MAX_MS,
  });
  // Every knob: DEFAULT_TUNING, the provider descriptor's own values, then the operator's variables.
  const { tuning } = config;
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  const redis = createWorkerRedis(config.redis, {}, log);
  // What this process's claims, recorder and reconciler know of PostgreSQL's last outage.
  const outage = createOutageClock();
  const recorder = createSendRecorder({ db, log, leaseMs: tuning.claimLeaseMs, flushMs: config.PUSH_RECORD_INTERVAL_MS, outage });
  // Subscribed before the first job: a change announced from then on reaches this worker's cache.
  const gate = config.compliance && createComplianceGate(config.compliance, { redis: config.redis, egress: config.egress, log });
  await gate?.ready;
  const compliance: SendCompliance | undefined = gate && { gate, maxWaitMs: config.compliance!.maxWaitMs };
  // The reconciler enqueues through a connection that fails fast: a pass with Redis down is simply tried again later.
  const producer = createProducerRedis(config.redis, {}, log);
  const queues = createPushQueues(producer, config.QUEUE_PREFIX);
  const metrics = await startMetricsServer({
    port: config.METRICS_PORT,
    // Asked through the connection that fails fast: the worker's own waits for Redis to come back.
    checks: {
      postgres: () => pingDb(db),
      redis: () => redisReadiness(producer),
    },
    stores: watchStores({ queueJobs: () => queueJobCounts([queues[provider]]) }, { log }),
  });
  const reconciler = startReconciler({
    db,
    queues,
    provider,
    log,
    intervalMs: tuning.reconcileIntervalMs,
    afterMs: tuning.reconcileAfterMs,
    leaseMs: tuning.claimLeaseMs,
    jobMaxMessages: tuning.jobMaxMessages,
    outage,
    sendPolicy: { attempts: tuning.sendAttempts, backoffMs: tuning.sendBackoffMs },
  });

  // The suppression metric's brand label: the brands this worker's credentials name, else other.
  const brandLabel = brandLabeler(config.credentials.brands.keys());
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
          leaseMs: tuning.claimLeaseMs,
          visibilityGraceMs: tuning.visibilityGraceMs,
          parallelMessages: tuning.parallelMessages,
          trackingSecret: config.TRACKING_SECRET,
          retryAfterMaxMs: config.PUSH_RETRY_AFTER_MAX_MS,
          outage,
          compliance,
          brandLabel,
        },
        run,
      ),
    {
      connection: redis,
      prefix: config.QUEUE_PREFIX,
      concurrency: tuning.workerConcurrency,
      backoffMs: tuning.sendBackoffMs,
      lockDurationMs: tuning.lockDurationMs,
      log,
    },
  );
  worker.on('failed', (job, error) => log.warn({ jobId: job?.id, attempts: job?.attemptsMade, reason: error.message }, 'send job attempt failed'));
  worker.on('error', redisErrorListener(redis));
  log.info({ provider, tuning, sandbox: config.sandbox, compliance: compliance !== undefined, metricsPort: metrics.port }, 'push worker started');

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
      await compliance?.gate.close();
      await closeDb(db);
      await redis.quit().catch(() => redis.disconnect());
      await metrics.close();
    },
    abandon: async () => {
      await recorder.release();
    },
  };
}
