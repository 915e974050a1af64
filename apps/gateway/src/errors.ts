import type { FastifyError, FastifyInstance } from 'fastify';
import { isDbUnavailable, isUnstorableText } from '@operator/db';

const isErrorBody = (payload: unknown): payload is { error: unknown; code?: unknown } =>
  payload !== null && typeof payload === 'object' && typeof (payload as { error?: unknown }).error === 'string';

/** How long a client is asked to wait before retrying a 503. */
export const RETRY_AFTER_SECONDS = 5;

/** Every error becomes `{"error", "code"}`; the hook adds `code`, so no refusal can leave it out. */
export function registerErrorHandling(app: FastifyInstance) {
  app.addHook('preSerialization', async (_request, reply, payload) => {
    if (reply.statusCode >= 400 && isErrorBody(payload) && payload.code === undefined) return { ...payload, code: reply.statusCode };
    return payload;
  });

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: `no route for ${request.method} ${request.url.split('?')[0]}` });
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode ?? 500;
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send({ error: `request body is larger than ${request.routeOptions.bodyLimit} bytes` });
    }
    if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
      return reply.code(400).send({ error: 'request body is empty; a JSON body is required' });
    }
    if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return reply.code(400).send({ error: `request body is not valid JSON: ${error.message}` });
    }
    // A NUL character cannot be stored in a text column: the client's mistake, never worth a retry.
    if (isUnstorableText(error)) {
      return reply.code(400).send({ error: 'text fields must not contain NUL characters' });
    }
    if (status === 503) {
      request.log.warn({ err: error }, 'answered 503');
      return reply.code(503).header('retry-after', String(RETRY_AFTER_SECONDS)).send({ error: error.message });
    }
    // An outage that reached here unwrapped (a route without orUnavailable) is still one: retry later.
    if (status >= 500 && isDbUnavailable(error)) {
      request.log.warn({ err: error }, 'answered 503');
      return reply.code(503).header('retry-after', String(RETRY_AFTER_SECONDS)).send({ error: 'store is unavailable, retry later' });
    }
    if (status >= 400 && status < 500) {
      return reply.code(status).send({ error: error.message });
    }
    request.log.error({ err: error }, 'request failed');
    return reply.code(500).send({ error: 'internal error' });
  });
}
