import type { ProviderDescriptor } from '@operator/providers';
import { HMS_ERRORS, hmsInfo, type HmsCredential } from './descriptor';
import { createHmsProvider, hmsOutcome } from './provider';

export { createHmsProvider, hmsOutcome, illegalTokens, readHmsAnswer, HMS_CODE, HMS_MAX_TOKENS_PER_REQUEST, type HmsAnswer, type HmsOutcome, type HmsProviderOptions } from './provider';
export { toHmsMessage, hmsSendBody, HMS_MAX_TTL_SECONDS, type HmsMessage } from './message';
export * from './descriptor';

export const hms: ProviderDescriptor<HmsCredential> = {
  ...hmsInfo,
  errors: HMS_ERRORS,
  classify: (code) => {
    const result = hmsOutcome({ status: 200, code }, ['token']).results[0];
    return result.ok ? undefined : result.error.code;
  },
  create: ({ appId, appSecret, endpoint }, { tuning, egress }) =>
    createHmsProvider({
      appId,
      appSecret,
      endpoint,
      proxy: egress,
      concurrency: tuning.providerConcurrency ?? undefined,
      maxConnections: tuning.providerConnections,
      timeoutMs: tuning.sendTimeoutMs,
    }),
};
