// Sends the push-fcm queue's jobs to Firebase Cloud Messaging (HTTP v1 API).
import { createLogger, loadPushWorkerConfig, onShutdown, runMain } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createFcmProvider } from '@operator/provider-fcm';
import { startPushWorker } from '@operator/push';

async function main() {
  const config = loadPushWorkerConfig('fcm');
  const log = createLogger('push-worker-fcm', config.LOG_LEVEL);
  const { providerConcurrency, providerConnections, sendTimeoutMs } = config.tuning;
  const worker = await startPushWorker('fcm', config, log, ({ serviceAccount, endpoint }) =>
    createFcmProvider({
      serviceAccount,
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
