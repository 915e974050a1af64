import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BoundKey, BrandSet, InternalKeys } from '@operator/config';
import type { SecurityScheme } from './docs';

/** One call, no Hash object: every request's key is digested. */
const digest = (key: string) => hash('sha256', key, 'buffer');

/**
 * The brands of the key presented, or undefined for none of `keys`. Several keys, so one can be
 * rotated without downtime; digests compared against every key, in constant time.
 */
export function boundKeyMatcher(keys: readonly BoundKey[]) {
  const allowed = keys.map(({ key, brands }) => ({ digest: digest(key), brands }));
  return (presented: string): BrandSet | undefined => {
    const candidate = digest(presented);
    let found: BrandSet | undefined;
    for (const key of allowed) if (timingSafeEqual(key.digest, candidate) && found === undefined) found = key.brands;
    return found;
  };
}

export function keyMatcher(keys: string[]) {
  const brandsOf = boundKeyMatcher(keys.map((key) => ({ key, brands: null })));
  return (presented: string) => brandsOf(presented) !== undefined;
}

/** Admits a key of `keys` and sets the brands it opens on the request. */
export function apiKeyGuard(keys: readonly BoundKey[]) {
  const brandsOf = boundKeyMatcher(keys);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const presented = request.headers['x-api-key'];
    if (typeof presented !== 'string' || presented === '') {
      return reply.code(401).send({ error: 'missing X-Api-Key header' });
    }
    const brands = brandsOf(presented);
    if (brands === undefined) return reply.code(401).send({ error: 'invalid API key' });
    request.brands = brands;
  };
}

export type InternalScope = keyof InternalKeys;

/** The keys each scope takes, as the OpenAPI document says it: an admin key opens the device routes too. */
const INTERNAL_SECURITY: Record<InternalScope, Partial<Record<SecurityScheme, []>>[]> = {
  devices: [{ internalDeviceKey: [] }, { internalAdminKey: [] }],
  admin: [{ internalAdminKey: [] }],
};

/** An unknown key answers 401; a device key on an admin route 403: it is known, and retrying cannot help. */
export function requireInternalKey(scope: FastifyInstance, keys: InternalKeys, needed: InternalScope) {
  const isInternalKey = apiKeyGuard(keys.devices);
  const opens = boundKeyMatcher(keys[needed]);
  scope.addHook('onRequest', async (request, reply) => {
    const refused = await isInternalKey(request, reply);
    if (refused) return refused;
    if (opens(request.headers['x-api-key'] as string) === undefined) {
      return reply.code(403).send({ error: 'this key opens the device routes only; this route takes an admin key (INTERNAL_ADMIN_KEYS)' });
    }
  });
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, security: INTERNAL_SECURITY[needed] };
  });
}

function basicPassword(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Basic\s+(\S+)\s*$/i.exec(header);
  if (!match) return undefined;
  const credentials = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = credentials.indexOf(':');
  return colon === -1 ? undefined : credentials.slice(colon + 1);
}

/** For pages opened in a browser: X-Api-Key, or HTTP Basic with the key as password. */
export function browserKeyGuard(keys: string[], realm: string) {
  const isKey = keyMatcher(keys);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const apiKey = request.headers['x-api-key'];
    const presented = typeof apiKey === 'string' && apiKey !== '' ? apiKey : basicPassword(request.headers.authorization);
    if (presented !== undefined && presented !== '' && isKey(presented)) return;
    return reply
      .code(401)
      .header('www-authenticate', `Basic realm="${realm}", charset="UTF-8"`)
      .send({ error: presented === undefined ? 'missing X-Api-Key header or Basic credentials' : 'invalid API key' });
  };
}
