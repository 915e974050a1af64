import type { Platform, ProviderName, PushRequest } from '@operator/contract';

export interface Notification {
  /** Every payload carries it so the app can report opens and clicks. */
  pushId: string;
  /** As stored, unknown fields included. */
  request: PushRequest;
  /** An HMAC of the push id that proves a device's open/click report; sent beside push_id. */
  trackingToken?: string;
}

export interface SendTarget {
  deliveryId: string;
  /** FCM registration token, APNs device token, or the Web Push endpoint. */
  token: string;
  platform: Platform | null;
  /** Web Push subscription keys (base64url); null for FCM and APNs. */
  p256dh: string | null;
  auth: string | null;
}

/**
 * One taxonomy for every provider: dead-token (deactivate the device), transient (retry after
 * retryAfterMs), auth (our credentials are wrong: stop sending with them), payload (this message
 * cannot go to this device: fail it, keep the device).
 */
export type ErrorClass = 'dead-token' | 'transient' | 'auth' | 'payload';

export type ErrorCode =
  | 'unregistered'
  | 'invalid-token'
  | 'rate-limited'
  | 'unavailable'
  | 'network'
  | 'auth'
  | 'payload-invalid'
  | 'payload-too-large'
  | 'origin-not-allowed'
  | 'address-refused'
  | 'subscription-refused';

export interface SendError {
  class: ErrorClass;
  code: ErrorCode;
  /** The provider's own words, for people. */
  message: string;
  /** As given; whatever waits on it cuts it to PUSH_RETRY_AFTER_MAX_MS. */
  retryAfterMs?: number;
  /** What waits on a transient error: `device` (default) this target, `origin` its push service, `credential` every send with the credential; never the queue. */
  scope?: ErrorScope;
}

export type ErrorScope = 'device' | 'origin' | 'credential';

export type SendResult = { ok: true; providerMessageId: string | null } | { ok: false; error: SendError };

export interface PushProvider {
  readonly name: ProviderName;
  /** Sends one push to each target; answers one result per target, in order. A per-device failure is a result, not a throw. */
  send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]>;
  close(): Promise<void>;
}

export const CLASS_OF: Record<ErrorCode, ErrorClass> = {
  unregistered: 'dead-token',
  'invalid-token': 'dead-token',
  'rate-limited': 'transient',
  unavailable: 'transient',
  network: 'transient',
  auth: 'auth',
  'payload-invalid': 'payload',
  'payload-too-large': 'payload',
  'origin-not-allowed': 'payload',
  'address-refused': 'payload',
  'subscription-refused': 'payload',
};

export function sendError(code: ErrorCode, message: string, retryAfterMs?: number, scope?: ErrorScope): SendError {
  return { class: CLASS_OF[code], code, message, ...(retryAfterMs === undefined ? {} : { retryAfterMs }), ...(scope === undefined ? {} : { scope }) };
}
