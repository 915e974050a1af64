import { Type } from '@sinclair/typebox';
import type { Env } from './env';

// The VAPID public keys the gateway hands to browsers (GET /v1/push/web/vapid-public-key): a page
// subscribes with the key its brand's pushes are signed with. Public keys only; the private ones
// stay with the Web Push worker.

export const VapidPublicKeysEnv = Type.Object({
  VAPID_PUBLIC_KEY: Type.String({ default: '', description: "The default brand's VAPID public key, base64url, answered to browsers (the Web Push worker's own)" }),
  VAPID_PUBLIC_KEYS: Type.String({
    default: '',
    description: "Brands' own VAPID public keys, `brand:key` joined by commas (each the webpush publicKey of that brand in PUSH_CREDENTIALS_FILE)",
  }),
});

export interface VapidPublicKeys {
  /** The default brand's: a brand without a key of its own gets it. */
  default?: string;
  /** By brand id. */
  brands: Map<string, string>;
}

/** Whether base64url `key` decodes to an uncompressed P-256 public key (65 bytes from 0x04): a VAPID key, a subscription's p256dh. */
export function isUncompressedP256Key(key: string): boolean {
  const bytes = Buffer.from(key, 'base64url');
  return bytes.length === 65 && bytes[0] === 4;
}

/** What PushManager.subscribe takes as applicationServerKey. */
function keyProblem(key: string): string | null {
  if (!/^[A-Za-z0-9_-]+$/.test(key)) return 'is not base64url';
  return isUncompressedP256Key(key) ? null : 'is not an uncompressed P-256 public key (65 bytes, base64url)';
}

export function vapidPublicKeysOf(env: Env): { keys: VapidPublicKeys; problems: string[] } {
  const problems: string[] = [];
  const keys: VapidPublicKeys = { brands: new Map() };
  const fallback = (env.VAPID_PUBLIC_KEY ?? '').trim();
  if (fallback) {
    const problem = keyProblem(fallback);
    if (problem) problems.push(`VAPID_PUBLIC_KEY ${problem}`);
    else keys.default = fallback;
  }
  for (const entry of (env.VAPID_PUBLIC_KEYS ?? '').split(',').map((part) => part.trim()).filter(Boolean)) {
    const [brand, key = '', ...rest] = entry.split(':');
    const problem = !/^\d+$/.test(brand) || rest.length ? 'must be brand:key' : keyProblem(key);
    if (problem) problems.push(`VAPID_PUBLIC_KEYS entry "${entry.slice(0, 20)}" ${problem}`);
    else if (keys.brands.has(brand)) problems.push(`VAPID_PUBLIC_KEYS names brand ${brand} twice`);
    else keys.brands.set(brand, key);
  }
  return { keys, problems };
}
