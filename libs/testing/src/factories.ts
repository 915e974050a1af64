import { createECDH, randomBytes, randomUUID } from 'node:crypto';
import type { PushRequest } from '@operator/contract';
import { uniqueId } from './ids';

export function pushRequest(brandId: number, userId: string, overrides: Partial<PushRequest> = {}): PushRequest {
  const id = uniqueId();
  return {
    activity: {
      id,
      brand_id: brandId,
      user_id: userId,
      activity_id: 71,
      action_group_id: 72,
      action_id: 73,
      trigger_hash: `trigger-${id}`,
    },
    title: 'Weekend reload',
    body: 'Your 50 free spins are waiting',
    meta: { campaign: 'weekend', variant: 2 },
    ...overrides,
  };
}

export const fcmToken = () => `fcm-${randomBytes(24).toString('base64url')}`;
export const apnsToken = () => randomBytes(32).toString('hex');
/** A Push Kit token's shape: a long run of letters, digits, `_`, `-` and `:`. */
export const hmsToken = () => `IQAAAAC${randomBytes(48).toString('base64url')}:APA91b`;
/** A OneSignal subscription id: a UUID. */
export const oneSignalSubscriptionId = () => randomUUID();

/** A browser's subscription; by default on FCM's Web Push origin, which WEBPUSH_ALLOWED_ORIGINS allows unless told otherwise. */
export function webPushSubscription(endpoint = `https://fcm.googleapis.com/fcm/send/${randomBytes(8).toString('hex')}`) {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    endpoint,
    keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') },
  };
}

/** A VAPID key pair (P-256), base64url, as web-push's generateVAPIDKeys makes. */
export function vapidKeys() {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const key = ecdh.getPrivateKey();
  const privateKey = Buffer.concat([Buffer.alloc(32 - key.length), key]);
  return { publicKey: ecdh.getPublicKey().toString('base64url'), privateKey: privateKey.toString('base64url') };
}
