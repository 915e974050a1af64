import type { ProviderDescriptor } from '@operator/providers';
import { APNS_ERRORS, apnsInfo, type ApnsCredential } from './descriptor';
import { apnsError, createApnsProvider } from './provider';

export { apnsError, createApnsProvider, type ApnsProviderOptions } from './provider';
export * from './descriptor';

export const apns: ProviderDescriptor<ApnsCredential> = {
  ...apnsInfo,
  errors: APNS_ERRORS,
  classify: (reason) => apnsError(400, reason).code,
  create: (credential, { tuning, egress, log }) =>
    createApnsProvider({
      ...credential,
      proxy: egress,
      timeoutMs: tuning.sendTimeoutMs,
      concurrency: tuning.providerConcurrency ?? undefined,
      maxConnections: tuning.providerConnections,
      onPatchMissing: (missing) => log.warn({ missing }, 'node-apn internals moved: these patches are off (see libs/provider-apns/src/node-apn-patches.ts)'),
    }),
};
