export { toFcmMessage, type TokenMessage } from './message';
export {
  createFcmProvider,
  fcmEndpointAgent,
  fcmSendError,
  serviceAccountCredential,
  type FcmProviderOptions,
  type FcmSdkRetry,
  type FcmServiceAccount,
} from './provider';
