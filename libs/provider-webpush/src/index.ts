import type { ProviderDescriptor } from '@operator/providers';
import { WEBPUSH_ERRORS, webPushInfo, type WebPushCredential } from './descriptor';
import { createWebPushProvider } from './provider';

export { createWebPushProvider, webPushPayload, MAX_WEB_PUSH_PLAINTEXT_BYTES, MAX_ANSWER_BYTES, type WebPushProviderOptions } from './provider';
export { CREDENTIALS_REFUSED_AFTER, CREDENTIALS_REFUSED_WINDOW_MS } from './push-services';
export * from './descriptor';

export const webpush: ProviderDescriptor<WebPushCredential> = {
  ...webPushInfo,
  errors: WEBPUSH_ERRORS,
  create: (credential, { tuning, egress, config }) =>
    createWebPushProvider({
      vapid: credential.vapid,
      allowedOrigins: config.webpushAllowedOrigins,
      egress,
      concurrency: tuning.providerConcurrency ?? undefined,
      connectionsPerOrigin: tuning.providerConnections,
      timeoutMs: tuning.sendTimeoutMs,
      retryAfterMaxMs: config.PUSH_RETRY_AFTER_MAX_MS,
    }),
};
