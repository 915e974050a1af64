import { createECDH, randomBytes } from 'node:crypto';
import { MAX_DEVICE_TOKEN_BYTES, type RegisterDevice, type WebPushSubscription } from '@operator/contract';
import { checkDeviceCredential } from './devices';

const APNS_TOKEN = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

/** A subscription as a browser gives it: a real uncompressed P-256 key and a 16-byte secret. */
function subscription(overrides: Partial<WebPushSubscription['keys']> = {}, endpoint = 'https://fcm.googleapis.com/fcm/send/abc123'): WebPushSubscription {
  const p256dh = createECDH('prime256v1').generateKeys().toString('base64url');
  const auth = randomBytes(16).toString('base64url');
  return { endpoint, keys: { p256dh, auth, ...overrides } };
}

const base = { user_id: 'player-1', brand_id: 3 };

describe('checkDeviceCredential: fcm and apns', () => {
  it('accepts an fcm token of any shape', () => {
    expect(checkDeviceCredential({ ...base, provider: 'fcm', platform: 'android', token: 'dGVzdDpBUEE5MWJH-token_value' })).toBeNull();
  });

  it('accepts a hex apns token, in either case', () => {
    expect(checkDeviceCredential({ ...base, provider: 'apns', platform: 'ios', token: APNS_TOKEN })).toBeNull();
    expect(checkDeviceCredential({ ...base, provider: 'apns', token: APNS_TOKEN.toUpperCase() })).toBeNull();
  });

  it.each(['fcm', 'apns'] as const)('requires a token for %s', (provider) => {
    expect(checkDeviceCredential({ ...base, provider })).toBe(`token is required for provider ${provider}`);
  });

  it.each(['fcm', 'apns'] as const)('refuses a subscription next to the %s token', (provider) => {
    const device: RegisterDevice = { ...base, provider, token: APNS_TOKEN, subscription: subscription() };
    expect(checkDeviceCredential(device)).toBe('subscription is only for provider webpush');
  });

  it.each(['fcm', 'apns'] as const)('refuses a subscription without a token for %s', (provider) => {
    expect(checkDeviceCredential({ ...base, provider, subscription: subscription() })).toBe(`token is required for provider ${provider}`);
  });

  it.each([
    ['non-hex characters', 'z'.repeat(64)],
    ['a base64 token', Buffer.from(APNS_TOKEN, 'hex').toString('base64')],
    ['too short', 'abcdef0123'],
    ['too long', 'a'.repeat(401)],
    ['spaces', `${APNS_TOKEN.slice(0, 32)} ${APNS_TOKEN.slice(32)}`],
  ])('refuses an apns token with %s', (_label, token) => {
    expect(checkDeviceCredential({ ...base, provider: 'apns', token })).toBe('token must be a hex APNs device token');
  });

  it('does not hold fcm tokens to the apns hex rule', () => {
    expect(checkDeviceCredential({ ...base, provider: 'fcm', token: 'not:hex/at_all' })).toBeNull();
  });
});

describe('checkDeviceCredential: hms and onesignal', () => {
  it('accepts an HMS push token and a OneSignal subscription id', () => {
    expect(checkDeviceCredential({ ...base, provider: 'hms', platform: 'android', token: 'AND8rUp4etqJvbakK7qQoCVgFHnROXzH8o7B8fTl9rMP5VRFN83zU3Nvmabm3xw7e3gZjyBbp_wfO1jP-UyDQcZN' })).toBeNull();
    expect(checkDeviceCredential({ ...base, provider: 'onesignal', token: '1DD608F2-C6A1-11E3-851D-000C2940E62C' })).toBeNull();
  });

  it.each([
    ['hms', 'too-short-19-chars!', 'token must be an HMS push token: at least 20 printable ASCII characters, no spaces'],
    ['hms', `${'a'.repeat(30)}\t${'b'.repeat(30)}`, 'token must be an HMS push token: at least 20 printable ASCII characters, no spaces'],
    ['hms', `${'a'.repeat(30)}é`, 'token must be an HMS push token: at least 20 printable ASCII characters, no spaces'],
    ['onesignal', 'player-7', 'token must be a OneSignal subscription id (a UUID)'],
    ['onesignal', '1dd608f2-c6a1-11e3-851d-000c2940e62', 'token must be a OneSignal subscription id (a UUID)'],
  ] as const)('refuses a %s token %j', (provider, token, message) => {
    expect(checkDeviceCredential({ ...base, provider, token })).toBe(message);
  });

  it.each(['hms', 'onesignal'] as const)('requires a token for %s, not a subscription', (provider) => {
    expect(checkDeviceCredential({ ...base, provider })).toBe(`token is required for provider ${provider}`);
    expect(checkDeviceCredential({ ...base, provider, token: '1dd608f2-c6a1-11e3-851d-000c2940e62c', subscription: subscription() })).toBe('subscription is only for provider webpush');
  });
});

describe('checkDeviceCredential: webpush', () => {
  it('accepts a real browser subscription', () => {
    expect(checkDeviceCredential({ ...base, provider: 'webpush', platform: 'web', subscription: subscription() })).toBeNull();
  });

  it('accepts base64url keys with padding', () => {
    const ecdh = createECDH('prime256v1').generateKeys();
    const keys = { p256dh: ecdh.toString('base64').replace(/\+/g, '-').replace(/\//g, '_'), auth: randomBytes(16).toString('base64url') + '==' };
    expect(keys.p256dh.endsWith('=')).toBe(true);
    expect(checkDeviceCredential({ ...base, provider: 'webpush', subscription: subscription(keys) })).toBeNull();
  });

  it('requires a subscription', () => {
    expect(checkDeviceCredential({ ...base, provider: 'webpush' })).toBe('subscription is required for provider webpush');
  });

  it('refuses a token instead of a subscription', () => {
    expect(checkDeviceCredential({ ...base, provider: 'webpush', token: 'abc' })).toBe('subscription is required for provider webpush');
  });

  it('refuses a token next to the subscription', () => {
    expect(checkDeviceCredential({ ...base, provider: 'webpush', token: 'abc', subscription: subscription() })).toBe(
      'token is not used for provider webpush; send subscription',
    );
  });

  it.each([
    ['a compressed key (33 bytes)', () => createECDH('prime256v1').generateKeys('base64url', 'compressed')],
    ['65 bytes not starting with 0x04', () => Buffer.concat([Buffer.from([0x05]), randomBytes(64)]).toString('base64url')],
    ['64 bytes', () => randomBytes(64).toString('base64url')],
    ['66 bytes starting with 0x04', () => Buffer.concat([Buffer.from([0x04]), randomBytes(65)]).toString('base64url')],
  ])('refuses a p256dh that is %s', (_label, makeKey) => {
    expect(checkDeviceCredential({ ...base, provider: 'webpush', subscription: subscription({ p256dh: makeKey() }) })).toBe(
      'subscription.keys.p256dh must be an uncompressed P-256 public key',
    );
  });

  it.each([15, 17, 32])('refuses an auth secret of %i bytes', (length) => {
    const auth = randomBytes(length).toString('base64url');
    expect(checkDeviceCredential({ ...base, provider: 'webpush', subscription: subscription({ auth }) })).toBe('subscription.keys.auth must be 16 bytes');
  });

  it('checks p256dh before auth', () => {
    const sub = subscription({ p256dh: randomBytes(10).toString('base64url'), auth: 'AA' });
    expect(checkDeviceCredential({ ...base, provider: 'webpush', subscription: sub })).toBe('subscription.keys.p256dh must be an uncompressed P-256 public key');
  });

  it('refuses an endpoint that is not a URL', () => {
    const sub = subscription({}, 'https://');
    expect(checkDeviceCredential({ ...base, provider: 'webpush', subscription: sub })).toBe('subscription.endpoint must be a URL');
  });
});

describe('checkDeviceCredential: what the database must store', () => {
  it(`accepts a token of ${MAX_DEVICE_TOKEN_BYTES} bytes and refuses one byte more, counting UTF-8 bytes`, () => {
    expect(checkDeviceCredential({ ...base, provider: 'fcm', token: 't'.repeat(MAX_DEVICE_TOKEN_BYTES) })).toBeNull();
    expect(checkDeviceCredential({ ...base, provider: 'fcm', token: `${'t'.repeat(MAX_DEVICE_TOKEN_BYTES - 1)}\u00e9` })).toBe(
      `token must be at most ${MAX_DEVICE_TOKEN_BYTES} bytes (UTF-8)`,
    );
  });

  it('refuses a Web Push endpoint over the byte limit', () => {
    const sub = subscription({}, `https://push.example.com/${'\u00e9'.repeat(MAX_DEVICE_TOKEN_BYTES / 2)}`);
    expect(checkDeviceCredential({ ...base, provider: 'webpush', subscription: sub })).toBe(`subscription.endpoint must be at most ${MAX_DEVICE_TOKEN_BYTES} bytes (UTF-8)`);
  });

  it.each([
    ['user_id', { user_id: 'p\udc00' }, 'user_id must not contain unpaired UTF-16 surrogates'],
    ['token', { token: '\ud800abc' }, 'token must not contain unpaired UTF-16 surrogates'],
    ['token (NUL)', { token: 'abc\u0000' }, 'token must not contain NUL characters'],
  ])('refuses text the database cannot store in %s', (_name, fields, error) => {
    expect(checkDeviceCredential({ ...base, provider: 'fcm', token: 'abc', ...fields })).toBe(error);
  });
});
