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
 * last, the kept text both), nesting too deep for PostgreSQL to parse what is stored, or a key that
 * could reach an object's prototype ("__proto__", a "constructor" object with "prototype", which
 * Fastify's parser refuses without saying why). On a route that answers each item of an array body
 * (the push batch), such an item is refused alone.
 */
const FORBIDDEN_PROTOTYPE = 'request body has a key named "__proto__", or a "constructor" object with a "prototype" key; neither is accepted';

/** Whether the text is JSON, read as JSON.parse reads it. */
function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The text's value with every key secure-json-parse refuses left out: a "__proto__" key, and a
 * "constructor" object that holds "prototype". JSON.parse only ever makes own properties, and the
 * items holding these keys are refused; this keeps even those out of the value the route gets.
 */
function parseWithoutPrototypeKeys(text: string): unknown {
  return JSON.parse(text, (key, value) => {
    if (key === '__proto__') return undefined;
    if (key === 'constructor' && value !== null && typeof value === 'object' && Object.hasOwn(value, 'prototype')) return undefined;
    return value;
  });
}

export function registerJsonBodies(app: FastifyInstance) {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const parseKeepingText: Parameters<typeof app.addContentTypeParser>[2] = (request, body, done) => {
    // The JSON parser skips a leading byte order mark; the kept text must not have it either.
    const text = (body as string).replace(/^\uFEFF/, '');
    request.rawBody = text;
    parseJson(request, body as string, (error, value) => {
      if (error) {
        // Valid JSON refused for a "__proto__" key (or a "constructor" holding "prototype"), which
        // checkJsonText names with its path. In an array every key is in an item: on a route that
        // answers each item, those items are refused alone.
        if (!isValidJson(text)) return done(error, undefined);
        const { problem, items } = checkJsonText(text);
        if (problem === null) return done(new ValidationError(FORBIDDEN_PROTOTYPE), undefined);
        if (!items.size || !request.routeOptions.config.answersEachItem) return done(new ValidationError(problem), undefined);
        request.itemProblems = items;
        return done(null, parseWithoutPrototypeKeys(text));
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
