import type { ProviderDescriptor } from '@operator/providers';
import { ONESIGNAL_ERRORS, oneSignalInfo, type OneSignalCredential } from './descriptor';
import { createOneSignalProvider } from './provider';

export {
  createOneSignalProvider,
  resultsOf,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_TIMEOUT_MS,
  MAX_ANSWER_BYTES,
  MAX_SUBSCRIPTIONS_PER_REQUEST,
  ONESIGNAL_API,
  type OneSignalProviderOptions,
} from './provider';
export { toOneSignalContent, createNotificationBody, type OneSignalContent, type OneSignalRequestBody } from './message';
export { idempotencyKey, IDEMPOTENCY_NAMESPACE } from './idempotency';
export * from './descriptor';

export const onesignal: ProviderDescriptor<OneSignalCredential> = {
  ...oneSignalInfo,
  errors: ONESIGNAL_ERRORS,
  create: ({ appId, restApiKey, endpoint }, { tuning, egress }) =>
    createOneSignalProvider({
      appId,
      restApiKey,
      endpoint,
      proxy: egress,
      concurrency: tuning.providerConcurrency ?? undefined,
      maxConnections: tuning.providerConnections,
      timeoutMs: tuning.sendTimeoutMs,
    }),
};
