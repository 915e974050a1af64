import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The token a push carries so the player's device can report it delivered, opened or clicked: an
 * HMAC of the push id. It proves the report is about a push the device received, and no API key
 * ever ships inside an app.
 */
export function trackingToken(secret: string, pushId: string): string {
  return createHmac('sha256', secret).update(`push:${pushId}`).digest('base64url');
}

export function isValidTrackingToken(secret: string, pushId: string, token: unknown): boolean {
  if (typeof token !== 'string') return false;
  const expected = Buffer.from(trackingToken(secret, pushId));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * When a push was accepted, in milliseconds since the epoch: its id is a UUIDv7 (accept.ts), whose
 * first 48 bits are that time. A token proves its id, so it proves the time too. Undefined for an
 * id that is no UUIDv7, which no push of this service has.
 */
export function pushAcceptedAt(pushId: string): number | undefined {
  const hex = pushId.replace(/-/g, '');
  if (!/^[0-9a-f]{12}7[0-9a-f]{19}$/i.test(hex)) return undefined;
  return parseInt(hex.slice(0, 12), 16);
}
