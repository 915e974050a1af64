export { createHmsProvider, hmsOutcome, illegalTokens, readHmsAnswer, HMS_CODE, HMS_MAX_TOKENS_PER_REQUEST, type HmsAnswer, type HmsOutcome, type HmsProviderOptions } from './provider';
export { toHmsMessage, hmsSendBody, HMS_MAX_TTL_SECONDS, type HmsMessage } from './message';
