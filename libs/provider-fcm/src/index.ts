import type { ProviderDescriptor } from '@operator/providers';
import { FCM_ERRORS, fcmInfo, type FcmCredential } from './descriptor';
import { createFcmProvider, fcmSendError } from './provider';

export { toFcmMessage, type TokenMessage } from './message';
export { createFcmProvider, fcmSendError, serviceAccountCredential, type FcmProviderOptions, type FcmSdkRetry, type FcmServiceAccount } from './provider';
export * from './descriptor';

export const fcm: ProviderDescriptor<FcmCredential> = {
  ...fcmInfo,
  errors: FCM_ERRORS,
  classify: (code) => fcmSendError({ code, message: code }).code,
  create: ({ serviceAccount, endpoint }, { tuning, egress }) =>
    createFcmProvider({
      serviceAccount,
      endpoint,
      proxy: egress,
      concurrency: tuning.providerConcurrency ?? undefined,
      maxConnections: tuning.providerConnections,
      timeoutMs: tuning.sendTimeoutMs,
    }),
};
