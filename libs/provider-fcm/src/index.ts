export { toFcmMessage, type TokenMessage } from './message';
export {
  createFcmProvider,
  fcmSendError,
  serviceAccountCredential,
  type FcmProviderOptions,
  type FcmSdkRetry,
  type FcmServiceAccount,
} from './provider';
export { errorTaxonomy } from './errors';
