import type { ProviderDescriptor } from '@operator/providers';
import { fcmInfo, type FcmCredential } from './descriptor';
import { errorTaxonomy, FCM_ERROR_CODES } from './errors';
import { createFcmProvider, fcmSendError } from './provider';

export { toFcmMessage, type TokenMessage } from './message';
export { createFcmProvider, fcmSendError, serviceAccountCredential, type FcmProviderOptions, type FcmSdkRetry, type FcmServiceAccount } from './provider';
export * from './descriptor';
export { errorTaxonomy } from './errors';

export const fcm: ProviderDescriptor<FcmCredential> = {
  ...fcmInfo,
  errors: errorTaxonomy,
  classify: (google) => fcmSendError({ code: FCM_ERROR_CODES[google] ?? google, message: google }).code,
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
