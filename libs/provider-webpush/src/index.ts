export { createWebPushProvider, webPushPayload, MAX_WEB_PUSH_PLAINTEXT_BYTES, type WebPushProviderOptions } from './provider';
