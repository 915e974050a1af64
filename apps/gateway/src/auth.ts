import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SecurityScheme } from './docs';

const digest = (key: string) => createHash('sha256').update(key).digest();

/**
 * Whether `presented` is one of `keys`. Several keys are accepted so one can be rotated without
 * downtime. Digests have a fixed length, so the comparison takes the same time whatever the key,
 * and every configured key is compared.
 */
export function keyMatcher(keys: string[]) {
  const allowed = keys.map(digest);
  return (presented: string) => {
    const candidate = digest(presented);
    let match = false;
    for (const key of allowed) match = timingSafeEqual(key, candidate) || match;
    return match;
  };
}

/** An onRequest hook that admits requests whose X-Api-Key is one of `keys`. */
export function apiKeyGuard(keys: string[]) {
  const isKey = keyMatcher(keys);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const presented = request.headers['x-api-key'];
    if (typeof presented !== 'string' || presented === '') {
      return reply.code(401).send({ error: 'missing X-Api-Key header' });
    }
    if (!isKey(presented)) return reply.code(401).send({ error: 'invalid API key' });
  };
}

/** Guards every route of `scope` with `keys`, and says so in the OpenAPI document (`scheme`). */
export function requireApiKey(scope: FastifyInstance, keys: string[], scheme: SecurityScheme) {
  scope.addHook('onRequest', apiKeyGuard(keys));
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, security: [{ [scheme]: [] }] };
  });
}

/** The password of an `Authorization: Basic` header (any user name), or undefined. */
function basicPassword(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Basic\s+(\S+)\s*$/i.exec(header);
  if (!match) return undefined;
  const credentials = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = credentials.indexOf(':');
  return colon === -1 ? undefined : credentials.slice(colon + 1);
}

/**
 * An onRequest hook for pages a person opens in a browser: admits X-Api-Key, or HTTP Basic with
 * any user name and the key as password. A refusal asks the browser for credentials.
 */
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
