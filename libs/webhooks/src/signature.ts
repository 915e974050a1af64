import { createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Signature';

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the receiver recomputes it with the
 * shared secret, compares in constant time, and refuses old timestamps (replays).
 */
export function signatureHeader(secret: string, body: string, timestamp = Math.floor(Date.now() / 1000)): string {
  return signer(secret)(body, timestamp);
}

/**
 * signatureHeader with one secret, made into a key once: a poster signs every post with it. The
 * body is hashed where it lies, not copied behind its timestamp first.
 */
export function signer(secret: string): (body: string, timestamp?: number) => string {
  const key = createSecretKey(Buffer.from(secret, 'utf8'));
  return (body, timestamp = Math.floor(Date.now() / 1000)) => `t=${timestamp},v1=${createHmac('sha256', key).update(`${timestamp}.`).update(body).digest('hex')}`;
}

/** What a receiver does with the header (also used by our tests). */
export function verifySignature(secret: string, body: string, header: string, toleranceSeconds = 300, now = Date.now()): boolean {
  const parts = Object.fromEntries(header.split(',').map((part) => part.trim().split('=', 2) as [string, string]));
  const timestamp = Number(parts.t);
  if (!Number.isInteger(timestamp) || !parts.v1) return false;
  if (Math.abs(now / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = Buffer.from(signatureHeader(secret, body, timestamp).split('v1=')[1], 'hex');
  const given = Buffer.from(parts.v1, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
