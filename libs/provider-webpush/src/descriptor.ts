import { Type } from '@sinclair/typebox';
import { isUncompressedP256Key, WebPushOriginsEnv } from '@operator/config';
import type { RegisterDevice } from '@operator/contract';
import type { ErrorCode, ProviderInfo } from '@operator/providers';

export const WebPushEnv = Type.Object({
  VAPID_PUBLIC_KEY: Type.String({ default: '', description: 'VAPID public key, base64url (default brand)' }),
  VAPID_PRIVATE_KEY: Type.String({ default: '', description: 'VAPID private key, base64url' }),
  VAPID_SUBJECT: Type.String({ default: '', description: 'mailto: or https: contact of the sender' }),
  ...WebPushOriginsEnv.properties,
});

export interface WebPushCredential {
  vapid: { publicKey: string; privateKey: string; subject: string };
}

/** A push service's statuses and what each becomes (the provider's outcomeOf reads them). */
export const WEBPUSH_ERRORS: Readonly<Record<string, ErrorCode>> = {
  'HTTP 404': 'unregistered',
  'HTTP 410': 'unregistered',
  'HTTP 429': 'rate-limited',
  'HTTP 401': 'subscription-refused',
  'HTTP 403': 'subscription-refused',
  'HTTP 413': 'payload-too-large',
  'HTTP 408': 'unavailable',
  'HTTP 5xx': 'unavailable',
  'HTTP 3xx': 'payload-invalid',
  'HTTP 4xx': 'payload-invalid',
};

/** A browser's subscription: its endpoint and its keys, well formed. */
function checkSubscription(device: RegisterDevice): string | null {
  if (!device.subscription) return 'subscription is required for provider webpush';
  if (device.token !== undefined) return 'token is not used for provider webpush; send subscription';
  if (!isUncompressedP256Key(device.subscription.keys.p256dh)) return 'subscription.keys.p256dh must be an uncompressed P-256 public key';
  if (Buffer.from(device.subscription.keys.auth, 'base64url').length !== 16) return 'subscription.keys.auth must be 16 bytes';
  try {
    new URL(device.subscription.endpoint);
  } catch {
    return 'subscription.endpoint must be a URL';
  }
  return null;
}

/** Web Push (RFC 8030, VAPID): its settings and its devices, without its client. */
export const webPushInfo: ProviderInfo<WebPushCredential> = {
  name: 'webpush',
  title: 'Web Push',
  checkDevice: checkSubscription,
  settings: {
    env: WebPushEnv,
    variables: { publicKey: 'VAPID_PUBLIC_KEY', privateKey: 'VAPID_PRIVATE_KEY', subject: 'VAPID_SUBJECT' },
    allowedOrigins: true,
    credential(w, read) {
      if (!read.requireAll({ publicKey: w.publicKey, privateKey: w.privateKey, subject: w.subject })) return undefined;
      const text = (value: unknown) => value as string;
      if (!/^(mailto:|https:)/.test(text(w.subject))) read.problem('the VAPID subject must start with mailto: or https:');
      return { vapid: { publicKey: text(w.publicKey), privateKey: text(w.privateKey), subject: text(w.subject) } };
    },
  },
  tuning: { providerConcurrency: 16, providerConnections: 100, sendTimeoutMs: 10000 },
};
