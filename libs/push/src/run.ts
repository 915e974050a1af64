import { createLogger, onShutdown, runMain } from '@operator/config';
import { MetricsPortError } from '@operator/metrics';
import { loadPushWorkerConfig } from '@operator/provider-registry';
import type { ProviderDescriptor } from '@operator/providers';
import { startPushWorker } from './worker';

/** The main of a provider's worker app: its configuration, its worker with the descriptor's clients, its shutdown. */
export function runPushWorker<C>(provider: ProviderDescriptor<C>): void {
  runMain(async () => {
    const config = loadPushWorkerConfig<C>(provider.name);
    const log = createLogger(`push-worker-${provider.name}`, config.LOG_LEVEL);
    const context = { tuning: config.tuning, egress: config.egress, config, log };
    const worker = await startPushWorker(provider.name, config, log, (credential) => provider.create(credential, context));
    onShutdown({ log, timeoutMs: config.SHUTDOWN_TIMEOUT_MS, close: worker.close, abandon: worker.abandon });
  }, MetricsPortError);
}
