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
