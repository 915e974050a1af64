// Sends the push-onesignal queue's jobs to OneSignal (REST API, create notification, idempotent requests).
import { createLogger, loadPushWorkerConfig, onShutdown, runMain } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createOneSignalProvider } from '@operator/provider-onesignal';
import { startPushWorker } from '@operator/push';

async function main() {
  const config = loadPushWorkerConfig('onesignal');
  const log = createLogger('push-worker-onesignal', config.LOG_LEVEL);
  const { providerConcurrency, providerConnections, sendTimeoutMs } = config.tuning;
  const worker = await startPushWorker('onesignal', config, log, ({ appId, restApiKey, endpoint }) =>
    createOneSignalProvider({
      appId,
      restApiKey,
      endpoint,
      proxy: config.egress,
      concurrency: providerConcurrency ?? undefined,
      maxConnections: providerConnections,
      timeoutMs: sendTimeoutMs,
    }),
  );
  onShutdown({ log, timeoutMs: config.SHUTDOWN_TIMEOUT_MS, close: worker.close, abandon: worker.abandon });
}

runMain(main, MetricsPortError);
