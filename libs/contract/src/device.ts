import { Type, type Static } from '@sinclair/typebox';
import { MAX_DEVICE_TOKEN_BYTES, MAX_USER_ID_LENGTH } from './limits';
import { checkStorable, utf8Bytes } from './storable';

/** A provider's name, as its descriptor gives it (the registry lists them). */
export type ProviderName = string;
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

/** What a provider's devices register, for the API's schemas: its name and what its token is (none: a subscription). */
export interface DeviceKind {
  name: string;
  token?: string;
}

function listed(words: string[]): string {
  return words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/** The body of POST /v1/devices for the providers given, in their order. */
export function registerDeviceSchema(kinds: readonly DeviceKind[]) {
  const tokens = kinds.flatMap((kind) => (kind.token ? [kind.token] : []));
  return Type.Object(
    {
      user_id: Type.String({ minLength: 1, maxLength: MAX_USER_ID_LENGTH }),
      brand_id: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
      provider: Type.Union(kinds.map((kind) => Type.Literal(kind.name))),
      platform: Type.Optional(Type.Union(PLATFORMS.map((p) => Type.Literal(p)))),
      token: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_DEVICE_TOKEN_BYTES, description: `${listed(tokens)}, at most ${MAX_DEVICE_TOKEN_BYTES} bytes` })),
      subscription: Type.Optional(WebPushSubscriptionSchema),
    },
    { $id: 'RegisterDevice' },
  );
}
export interface RegisterDevice {
  user_id: string;
  brand_id: number;
  provider: ProviderName;
  platform?: Platform;
  token?: string;
  subscription?: WebPushSubscription;
}

/** A device as the API answers it, for the providers given. */
export function deviceSchema(kinds: readonly DeviceKind[]) {
  return Type.Object(
    {
      id: Type.String(),
      user_id: Type.String(),
      brand_id: Type.Integer(),
      provider: Type.Union(kinds.map((kind) => Type.Literal(kind.name))),
      platform: Type.Union([...PLATFORMS.map((p) => Type.Literal(p)), Type.Null()]),
      token: Type.String({ description: 'Device token, or the Web Push endpoint' }),
      active: Type.Boolean(),
      deactivated_reason: Type.Union([Type.String(), Type.Null()]),
      created_at: Type.String(),
      updated_at: Type.String(),
    },
    { $id: 'Device' },
  );
}
export interface DeviceView {
  id: string;
  user_id: string;
  brand_id: number;
  provider: ProviderName;
  platform: Platform | null;
  token: string;
  active: boolean;
  deactivated_reason: string | null;
  created_at: string;
  updated_at: string;
}

const tooLong = (text: string) => utf8Bytes(text) > MAX_DEVICE_TOKEN_BYTES;

/**
 * The rules a schema cannot say: that every text can be stored as sent and the token fits its
 * index (in bytes), then the provider's own check of its credential (its descriptor's).
 */
export function checkDeviceCredential(device: RegisterDevice, checkDevice: (device: RegisterDevice) => string | null): string | null {
  const unstorable = checkStorable(device);
  if (unstorable) return unstorable;
  if (device.token !== undefined && tooLong(device.token)) return `token must be at most ${MAX_DEVICE_TOKEN_BYTES} bytes (UTF-8)`;
  if (device.subscription && tooLong(device.subscription.endpoint)) return `subscription.endpoint must be at most ${MAX_DEVICE_TOKEN_BYTES} bytes (UTF-8)`;
  return checkDevice(device);
}

/** The check of a provider whose devices register a token: present, no subscription, of the form given. */
export function tokenCheck(form?: { pattern: RegExp; problem: string }): (device: RegisterDevice) => string | null {
  return (device) => {
    if (device.token === undefined) return `token is required for provider ${device.provider}`;
    if (device.subscription !== undefined) return `subscription is only for provider webpush`;
    if (form && !form.pattern.test(device.token)) return form.problem;
    return null;
  };
}
