import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { BrandSet } from '@operator/config';

// The access tokens of /oauth/token: HS256 JWTs carrying all a replica needs to verify them, so
// gateways share no state.

export type Clock = () => number;
export const systemClock: Clock = () => Math.floor(Date.now() / 1000);

const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const hmac = (key: string, text: string) => createHmac('sha256', key).update(text).digest();

/** Names a key in a token's header without revealing it, so a token is checked against that key alone. */
export const keyId = (key: string) => createHash('sha256').update(`crm-oauth-signing-key:${key}`).digest('base64url').slice(0, 16);

export interface TokenClaims {
  sub: string;
  iat: number;
  exp: number;
  /** The brands its client opens; absent: every brand. */
  brands?: string[];
}

export function issueAccessToken(key: string, clientId: string, ttlSeconds: number, clock: Clock = systemClock, brands: BrandSet = null): string {
  const iat = clock();
  const claims: TokenClaims = { sub: clientId, iat, exp: iat + ttlSeconds, ...(brands === null ? {} : { brands: [...brands] }) };
  const signed = `${encode({ alg: 'HS256', typ: 'JWT', kid: keyId(key) })}.${encode(claims)}`;
  return `${signed}.${hmac(key, signed).toString('base64url')}`;
}

export type TokenCheck = { ok: true; claims: TokenClaims } | { ok: false; error: 'malformed' | 'unknown key' | 'bad signature' | 'expired' };

const SEGMENT = /^[A-Za-z0-9_-]+$/;

function decodeJson(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Any of `keys` may have signed it, so the key rotates without downtime; the signature is checked first. */
export function verifyAccessToken(keys: string[], token: string, clock: Clock = systemClock): TokenCheck {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((part) => SEGMENT.test(part))) return { ok: false, error: 'malformed' };
  const [header, payload, signature] = parts;
  const head = decodeJson(header);
  // The algorithm is fixed: a token naming another (`none`, RS256) is refused, never honoured.
  if (head?.alg !== 'HS256' || typeof head.kid !== 'string') return { ok: false, error: 'malformed' };
  const key = keys.find((candidate) => keyId(candidate) === head.kid);
  if (key === undefined) return { ok: false, error: 'unknown key' };
  const expected = hmac(key, `${header}.${payload}`);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, error: 'bad signature' };
  const claims = decodeJson(payload);
  if (typeof claims?.sub !== 'string' || !Number.isInteger(claims.iat) || !Number.isInteger(claims.exp)) return { ok: false, error: 'malformed' };
  const brands = claims.brands;
  if (brands !== undefined && !(Array.isArray(brands) && brands.every((id) => typeof id === 'string'))) return { ok: false, error: 'malformed' };
  if ((claims.exp as number) <= clock()) return { ok: false, error: 'expired' };
  return { ok: true, claims: claims as unknown as TokenClaims };
}
