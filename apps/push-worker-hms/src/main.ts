// Sends the push-hms queue's jobs to Huawei Push Kit (HMS Core push server API, OAuth 2.0 client credentials).
import { createLogger, loadPushWorkerConfig, onShutdown, runMain } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createHmsProvider } from '@operator/provider-hms';
import { startPushWorker } from '@operator/push';

async function main() {
  const config = loadPushWorkerConfig('hms');
  const log = createLogger('push-worker-hms', config.LOG_LEVEL);
  const { providerConcurrency, providerConnections, sendTimeoutMs } = config.tuning;
  const worker = await startPushWorker('hms', config, log, ({ appId, appSecret, endpoint }) =>
    createHmsProvider({
      appId,
      appSecret,
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
