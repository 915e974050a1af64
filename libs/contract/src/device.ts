import { Type, type Static } from '@sinclair/typebox';

export const PROVIDERS = ['fcm', 'apns', 'webpush'] as const;
export type Provider = (typeof PROVIDERS)[number];
export const PLATFORMS = ['android', 'ios', 'web'] as const;
export type Platform = (typeof PLATFORMS)[number];

const Base64Url = (description: string) =>
  Type.String({ pattern: '^[A-Za-z0-9_-]+={0,2}$', maxLength: 256, description, errorMessage: 'must be base64url' });

export const WebPushSubscriptionSchema = Type.Object(
  {
    endpoint: Type.String({ pattern: '^https://', maxLength: 2048, description: 'Push service URL (https)', errorMessage: 'must be an https URL' }),
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
    user_id: Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\u0000]*$', errorMessage: 'must not contain NUL characters' }),
    brand_id: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    provider: Type.Union(PROVIDERS.map((p) => Type.Literal(p))),
    platform: Type.Optional(Type.Union(PLATFORMS.map((p) => Type.Literal(p)))),
    token: Type.Optional(
      Type.String({ minLength: 1, maxLength: 4096, pattern: '^[^\\u0000]*$', errorMessage: 'must not contain NUL characters', description: 'FCM or APNs device token' }),
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

function base64UrlBytes(text: string): number {
  return Buffer.from(text, 'base64url').length;
}

/** The rules a schema cannot say: which credential each provider needs, and that it is well formed. */
export function checkDeviceCredential(device: RegisterDevice): string | null {
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
  return null;
}
