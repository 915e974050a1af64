import type { ProviderName } from '@operator/contract';
import type { Db } from '@operator/db';
import { createSandboxProvider } from '@operator/providers';
import { createSendRecorder, processSendJob } from '@operator/push';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** What a push worker does with a send job, with its provider's sandbox: for specs that need pushes sent. */
export function sandboxSender(db: Db, trackingSecret: string) {
  const recorder = createSendRecorder({ db, log: silent, leaseMs: 60000 });
  const send = (pushIds: string[], provider: ProviderName = 'fcm') =>
    processSendJob(
      {
        db,
        provider,
        providerFor: () => createSandboxProvider(provider),
        log: silent,
        recorder,
        leaseMs: 60000,
        visibilityGraceMs: 30000,
        parallelMessages: 4,
        trackingSecret,
        retryAfterMaxMs: 300000,
      },
      { pushIds, attempt: 1, maxAttempts: 3, enqueuedAt: Date.now() },
    );
  return { send, recorder, close: () => recorder.close() };
}
