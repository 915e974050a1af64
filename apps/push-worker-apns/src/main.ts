// Sends the push-apns queue's jobs to Apple Push Notification service over HTTP/2 (token auth).
import { createLogger, loadPushWorkerConfig, onShutdown, runMain } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createApnsProvider } from '@operator/provider-apns';
import { startPushWorker } from '@operator/push';

async function main() {
  const config = loadPushWorkerConfig('apns');
  const log = createLogger('push-worker-apns', config.LOG_LEVEL);
  const onPatchMissing = (missing: string[]) =>
    log.warn({ missing }, 'node-apn internals moved: these patches are off (see libs/provider-apns/src/node-apn-patches.ts)');
  const { providerConcurrency, providerConnections, sendTimeoutMs } = config.tuning;
  const worker = await startPushWorker('apns', config, log, (credential) =>
    createApnsProvider({
      ...credential,
      proxy: config.egress,
      timeoutMs: sendTimeoutMs,
      concurrency: providerConcurrency ?? undefined,
      maxConnections: providerConnections,
      onPatchMissing,
    }),
  );
  onShutdown({ log, timeoutMs: config.SHUTDOWN_TIMEOUT_MS, close: worker.close, abandon: worker.abandon });
}

runMain(main, MetricsPortError);
