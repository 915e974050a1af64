// Sends the push-webpush queue's jobs to browsers' push services (RFC 8030, VAPID, aes128gcm).
import { createLogger, loadPushWorkerConfig, onShutdown, runMain } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createWebPushProvider } from '@operator/provider-webpush';
import { startPushWorker } from '@operator/push';

async function main() {
  const config = loadPushWorkerConfig('webpush');
  const log = createLogger('push-worker-webpush', config.LOG_LEVEL);
  const { providerConcurrency, providerConnections, sendTimeoutMs } = config.tuning;
  const worker = await startPushWorker('webpush', config, log, (credential) =>
    createWebPushProvider({
      vapid: credential.vapid,
      allowedOrigins: config.webpushAllowedOrigins,
      egress: config.egress,
      concurrency: providerConcurrency ?? undefined,
      connectionsPerOrigin: providerConnections,
      timeoutMs: sendTimeoutMs,
      retryAfterMaxMs: config.PUSH_RETRY_AFTER_MAX_MS,
    }),
  );
  onShutdown({ log, timeoutMs: config.SHUTDOWN_TIMEOUT_MS, close: worker.close, abandon: worker.abandon });
}

runMain(main, MetricsPortError);
