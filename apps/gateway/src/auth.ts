import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

const digest = (key: string) => createHash('sha256').update(key).digest();

/**
 * An onRequest hook that admits requests whose X-Api-Key is one of `keys`. Several keys are
 * accepted so one can be rotated without downtime. Digests have a fixed length, so the comparison
 * takes the same time whatever the key, and every configured key is compared.
 */
export function apiKeyGuard(keys: string[]) {
  const allowed = keys.map(digest);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const presented = request.headers['x-api-key'];
    if (typeof presented !== 'string' || presented === '') {
      return reply.code(401).send({ error: 'missing X-Api-Key header' });
    }
    const candidate = digest(presented);
    let match = false;
    for (const key of allowed) match = timingSafeEqual(key, candidate) || match;
    if (!match) return reply.code(401).send({ error: 'invalid API key' });
  };
}
