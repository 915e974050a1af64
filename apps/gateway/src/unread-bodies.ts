import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { OPEN_ROUTE_BODY_LIMIT_BYTES } from '@operator/contract';

// Nothing is read before it is authorised: a request no route takes is answered from its headers,
// and an answer given before a body was read (a 401, a 404, a 405, a 503) closes the connection
// when that body is large, so Node does not read it to keep the connection alive.

/** The body of every internal route (devices, admin) fits: the largest, a redrive of 10,000 event ids, is about 400 KB. */
export const INTERNAL_BODY_LIMIT_BYTES = 1024 * 1024;

/** Whether the request announces a body Node would have to read past what an early answer needs: larger than a few KiB, or of unknown length. */
export function announcesLargeBody(request: FastifyRequest): boolean {
  if (request.headers['transfer-encoding'] !== undefined) return true;
  return Number(request.headers['content-length'] ?? 0) > OPEN_ROUTE_BODY_LIMIT_BYTES;
}

/**
 * An onRequest hook answering a request no route takes: 405 with Allow when its path has routes
 * for other methods, 404 otherwise, its body never read (Fastify's not-found route would read and
 * parse it first). `maxParamLength` is the gateway's router's, so both match the same paths.
 */
export function answerUnroutedEarly(app: FastifyInstance, maxParamLength: number) {
  // Fastify's own router (find-my-way), holding every route's path, to find those of other methods.
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

/** An onSend hook: an answer given before a large or chunked body was read closes its connection, so the body is not read. */
export function closeOnUnreadBodies(app: FastifyInstance) {
  app.addHook('onSend', async (request, reply, payload) => {
    if (!request.raw.complete && announcesLargeBody(request)) reply.header('connection', 'close');
    return payload;
  });
}
