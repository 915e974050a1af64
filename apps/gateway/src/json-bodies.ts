import type { FastifyInstance } from 'fastify';
import { checkJsonText, ValidationError } from '@operator/contract';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request body as received, for the JSON bodies of this API. */
    rawBody?: string;
    /** Of an array body, on a route that answers each item itself: why items were refused, by index. */
    itemProblems?: Map<number, string>;
  }
  interface FastifyContextConfig {
    /**
     * The route answers each item of an array body on its own (the push batch): an item's problem
     * is left in `request.itemProblems` for it, rather than refusing the whole body.
     */
    answersEachItem?: boolean;
  }
}

/**
 * Every body of this API is JSON, whatever Content-Type a client declares, and is read once. The
 * text is kept (the CRM's `meta` is stored and returned exactly as it was written), so a text that
 * would not read the same everywhere is refused with 400: a key given twice (JSON.parse keeps the
 * last, the kept text both), or nesting too deep for PostgreSQL to parse what is stored.
 */
const FORBIDDEN_PROTOTYPE = 'request body has a key named "__proto__", or a "constructor" object with a "prototype" key; neither is accepted';

/** Whether the text is JSON, read as JSON.parse reads it (Fastify's parser, which refuses those keys, does not say why). */
function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

export function registerJsonBodies(app: FastifyInstance) {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const parseKeepingText: Parameters<typeof app.addContentTypeParser>[2] = (request, body, done) => {
    // The JSON parser skips a leading byte order mark; the kept text must not have it either.
    const text = (body as string).replace(/^\uFEFF/, '');
    request.rawBody = text;
    parseJson(request, body as string, (error, value) => {
      if (error) {
        // Valid JSON refused for a "__proto__" key (or a "constructor" holding "prototype"): a key
        // given twice or nesting too deep is still named first, as for any other body.
        if (!isValidJson(text)) return done(error, undefined);
        const { problem } = checkJsonText(text);
        return done(new ValidationError(problem ?? FORBIDDEN_PROTOTYPE), undefined);
      }
      const { problem, items } = checkJsonText(text);
      if (items.size && request.routeOptions.config.answersEachItem) request.itemProblems = items;
      else if (problem !== null) return done(new ValidationError(problem), undefined);
      done(null, value);
    });
  };
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseKeepingText);
  app.addContentTypeParser('*', { parseAs: 'string' }, parseKeepingText);
}
