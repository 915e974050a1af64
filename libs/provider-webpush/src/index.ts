export { createWebPushProvider, webPushPayload, MAX_WEB_PUSH_PLAINTEXT_BYTES, MAX_ANSWER_BYTES, type WebPushProviderOptions } from './provider';
export { CREDENTIALS_REFUSED_AFTER, CREDENTIALS_REFUSED_WINDOW_MS } from './push-services';
