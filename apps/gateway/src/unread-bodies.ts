import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { OPEN_ROUTE_BODY_LIMIT_BYTES } from '@operator/contract';

// Nothing is read before it is authorised: a request no route takes is answered from its headers,
// and an early answer closes the connection of a large body, so Node does not read it.

/** The largest internal body, a redrive of 10,000 event ids, is about 400 KB. */
export const INTERNAL_BODY_LIMIT_BYTES = 1024 * 1024;

/** Larger than a few KiB, or of unknown length. */
export function announcesLargeBody(request: FastifyRequest): boolean {
  if (request.headers['transfer-encoding'] !== undefined) return true;
  return Number(request.headers['content-length'] ?? 0) > OPEN_ROUTE_BODY_LIMIT_BYTES;
}

/**
 * 405 or 404 for a request no route takes, its body never read (Fastify's not-found route would
 * parse it first). `maxParamLength` is the router's, so both match the same paths.
 */
export function answerUnroutedEarly(app: FastifyInstance, maxParamLength: number) {
  const paths = FindMyWay({ maxParamLength });
  const methods = new Set<HTTPMethod>();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat() as HTTPMethod[]) {
      methods.add(method);
      // A route may be registered twice under one method (HEAD beside GET): the first suffices.
      if (!paths.hasRoute(method, route.url)) paths.on(method, route.url, () => undefined);
    }
  });
  app.addHook('onRequest', async (request, reply) => {
    if (!request.is404) return;
    const path = request.url.split('?')[0];
    const allowed = [...methods].filter((method) => method !== request.method && paths.find(method, path) !== null).sort();
    if (allowed.length === 0) return reply.code(404).send({ error: `no route for ${request.method} ${path}` });
    return reply
      .code(405)
      .header('allow', allowed.join(', '))
      .send({ error: `${request.method} is not allowed on ${path}; it takes ${allowed.join(', ')}` });
  });
}

export function closeOnUnreadBodies(app: FastifyInstance) {
  app.addHook('onSend', async (request, reply, payload) => {
    if (!request.raw.complete && announcesLargeBody(request)) reply.header('connection', 'close');
    return payload;
  });
}
