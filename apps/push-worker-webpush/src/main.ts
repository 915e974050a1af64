// Sends the push-webpush queue's jobs to browsers' push services (RFC 8030, VAPID, aes128gcm).
import {
  ConfigError,
  createLogger,
  DEFAULT_WEBPUSH_ALLOWED_ORIGINS,
  loadPushWorkerConfig,
  onShutdown,
  parseAllowedOrigins,
  runMain,
  type AllowedOrigin,
} from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { createWebPushProvider } from '@operator/provider-webpush';
import { startPushWorker } from '@operator/push';

/** WEBPUSH_ALLOWED_ORIGINS, read here until the worker's config carries it. */
function webPushAllowedOriginsFromEnv(): AllowedOrigin[] {
  const parsed = parseAllowedOrigins(process.env.WEBPUSH_ALLOWED_ORIGINS || DEFAULT_WEBPUSH_ALLOWED_ORIGINS);
  if (!parsed.ok) throw new ConfigError(parsed.problems.map((problem) => `WEBPUSH_ALLOWED_ORIGINS: ${problem}`));
  return parsed.origins;
}

async function main() {
  const config = loadPushWorkerConfig('webpush');
  const allowedOrigins = webPushAllowedOriginsFromEnv();
  const log = createLogger('push-worker-webpush', config.LOG_LEVEL);
  const { providerConcurrency, sendTimeoutMs } = config.tuning;
  const worker = await startPushWorker('webpush', config, log, (credential) =>
    createWebPushProvider({
      vapid: credential.vapid,
      allowedOrigins,
      egress: config.egress,
      concurrency: providerConcurrency ?? undefined,
      timeoutMs: sendTimeoutMs,
    }),
  );
  onShutdown({ log, timeoutMs: config.SHUTDOWN_TIMEOUT_MS, close: worker.close, abandon: worker.abandon });
}

runMain(main, MetricsPortError);
