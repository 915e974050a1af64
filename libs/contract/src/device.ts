import { Type, type Static } from '@sinclair/typebox';
import { MAX_DEVICE_TOKEN_BYTES, MAX_USER_ID_LENGTH } from './limits';
import { checkStorable, utf8Bytes } from './storable';

export const PROVIDERS = ['fcm', 'apns', 'webpush', 'hms', 'onesignal'] as const;
export type ProviderName = (typeof PROVIDERS)[number];
export const PLATFORMS = ['android', 'ios', 'web'] as const;
export type Platform = (typeof PLATFORMS)[number];

const Base64Url = (description: string) =>
  Type.String({ pattern: '^[A-Za-z0-9_-]+={0,2}$', maxLength: 256, description, errorMessage: 'must be base64url' });

export const WebPushSubscriptionSchema = Type.Object(
  {
    endpoint: Type.String({
      pattern: '^https://',
      maxLength: MAX_DEVICE_TOKEN_BYTES,
      description:
        "Push service URL (https), on an origin the operator's WEBPUSH_ALLOWED_ORIGINS lists; by default the browsers' push services " +
        '(https://fcm.googleapis.com, https://updates.push.services.mozilla.com, https://web.push.apple.com, https://*.notify.windows.com). ' +
        'Any other origin, a port other than the listed one, user info or a host not written as a plain domain name or IP address: 400',
      errorMessage: 'must be an https URL',
    }),
    keys: Type.Object({
      p256dh: Base64Url('The browser P-256 public key, base64url'),
      auth: Base64Url('The 16-byte auth secret, base64url'),
    }),
  },
  { $id: 'WebPushSubscription' },
);
export type WebPushSubscription = Static<typeof WebPushSubscriptionSchema>;

export const RegisterDeviceSchema = Type.Object(
  {
    user_id: Type.String({ minLength: 1, maxLength: MAX_USER_ID_LENGTH }),
    brand_id: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    provider: Type.Union(PROVIDERS.map((p) => Type.Literal(p))),
    platform: Type.Optional(Type.Union(PLATFORMS.map((p) => Type.Literal(p)))),
    token: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_DEVICE_TOKEN_BYTES, description: `FCM registration token, APNs device token (hex), HMS push token or OneSignal subscription id (a UUID), at most ${MAX_DEVICE_TOKEN_BYTES} bytes` }),
    ),
    subscription: Type.Optional(WebPushSubscriptionSchema),
  },
  { $id: 'RegisterDevice' },
);
export type RegisterDevice = Static<typeof RegisterDeviceSchema>;

export const DeviceSchema = Type.Object(
  {
    id: Type.String(),
    user_id: Type.String(),
    brand_id: Type.Integer(),
    provider: Type.Union(PROVIDERS.map((p) => Type.Literal(p))),
    platform: Type.Union([...PLATFORMS.map((p) => Type.Literal(p)), Type.Null()]),
    token: Type.String({ description: 'Device token, or the Web Push endpoint' }),
    active: Type.Boolean(),
    deactivated_reason: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String(),
    updated_at: Type.String(),
  },
  { $id: 'Device' },
);
export type DeviceView = Static<typeof DeviceSchema>;

const APNS_TOKEN = /^[0-9a-fA-F]{16,400}$/;
/** Push Kit's tokens are printable ASCII (today letters, digits, `_`, `-`, `:`), far longer than 20 characters. */
const HMS_TOKEN = /^[\x21-\x7e]{20,}$/;
/** OneSignal names a device by its subscription id (formerly player id), a UUID. */
const ONESIGNAL_SUBSCRIPTION_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function base64UrlBytes(text: string): number {
  return Buffer.from(text, 'base64url').length;
}

const tooLong = (text: string) => utf8Bytes(text) > MAX_DEVICE_TOKEN_BYTES;

/**
 * The rules a schema cannot say: that every text can be stored as sent and the token fits its
 * index (in bytes), which credential each provider needs, and that it is well formed.
 */
export function checkDeviceCredential(device: RegisterDevice): string | null {
  const unstorable = checkStorable(device);
  if (unstorable) return unstorable;
  if (device.token !== undefined && tooLong(device.token)) return `token must be at most ${MAX_DEVICE_TOKEN_BYTES} bytes (UTF-8)`;
  if (device.subscription && tooLong(device.subscription.endpoint)) return `subscription.endpoint must be at most ${MAX_DEVICE_TOKEN_BYTES} bytes (UTF-8)`;
  if (device.provider === 'webpush') {
    if (!device.subscription) return 'subscription is required for provider webpush';
    if (device.token !== undefined) return 'token is not used for provider webpush; send subscription';
    const key = Buffer.from(device.subscription.keys.p256dh, 'base64url');
    if (key.length !== 65 || key[0] !== 4) return 'subscription.keys.p256dh must be an uncompressed P-256 public key';
    if (base64UrlBytes(device.subscription.keys.auth) !== 16) return 'subscription.keys.auth must be 16 bytes';
    try {
      new URL(device.subscription.endpoint);
    } catch {
      return 'subscription.endpoint must be a URL';
    }
    return null;
  }
  if (device.token === undefined) return `token is required for provider ${device.provider}`;
  if (device.subscription !== undefined) return `subscription is only for provider webpush`;
  if (device.provider === 'apns' && !APNS_TOKEN.test(device.token)) return 'token must be a hex APNs device token';
  if (device.provider === 'hms' && !HMS_TOKEN.test(device.token)) return 'token must be an HMS push token: at least 20 printable ASCII characters, no spaces';
  if (device.provider === 'onesignal' && !ONESIGNAL_SUBSCRIPTION_ID.test(device.token)) return 'token must be a OneSignal subscription id (a UUID)';
  return null;
}
