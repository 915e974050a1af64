// Sends the push-fcm queue's jobs to Firebase Cloud Messaging (HTTP v1 API).
import { ConfigError, createLogger, loadPushWorkerConfig, onShutdown } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createFcmProvider } from '@operator/provider-fcm';
import { startPushWorker } from '@operator/push';

async function main() {
  const config = loadPushWorkerConfig('fcm');
  const log = createLogger('push-worker-fcm', config.LOG_LEVEL);
  const worker = await startPushWorker('fcm', config, log, ({ serviceAccount, endpoint }) => createFcmProvider({ serviceAccount, endpoint }));
  onShutdown({ log, timeoutMs: config.SHUTDOWN_TIMEOUT_MS, close: worker.close, abandon: worker.abandon });
}

main().catch((error) => {
  console.error(error instanceof ConfigError || error instanceof MetricsPortError ? error.message : error);
  process.exit(1);
});
