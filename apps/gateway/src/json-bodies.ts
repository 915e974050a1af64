import type { FastifyInstance } from 'fastify';
import { checkJsonText, ValidationError } from '@operator/contract';

declare module 'fastify' {
  interface FastifyRequest {
    rawBody?: string;
    /** Why items of an array body were refused, by index. */
    itemProblems?: Map<number, string>;
    /** The text of the route's `keepsField` as written: in an object body, or in each item of an array. */
    rawField?: string | undefined | (string | undefined)[];
  }
  interface FastifyContextConfig {
    /** An item's problem is left in `itemProblems` for the route, rather than refusing the whole body. */
    answersEachItem?: boolean;
    /** A top-level member whose value's text the route needs byte for byte (`meta`), read in the check's pass. */
    keepsField?: string;
  }
}

const FORBIDDEN_PROTOTYPE = 'request body has a key named "__proto__", or a "constructor" object with a "prototype" key; neither is accepted';

function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The text's value without the keys secure-json-parse refuses, so not even a refused item holds them. */
function parseWithoutPrototypeKeys(text: string): unknown {
  return JSON.parse(text, (key, value) => {
    if (key === '__proto__') return undefined;
    if (key === 'constructor' && value !== null && typeof value === 'object' && Object.hasOwn(value, 'prototype')) return undefined;
    return value;
  });
}

/**
 * Every body is JSON whatever its Content-Type, its text kept (`meta` is returned byte for byte). A
 * text that would not read the same everywhere is refused with 400.
 */
export function registerJsonBodies(app: FastifyInstance) {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const parseKeepingText: Parameters<typeof app.addContentTypeParser>[2] = (request, body, done) => {
    // The JSON parser skips a leading byte order mark; the kept text must not have it either.
    const text = (body as string).replace(/^\uFEFF/, '');
    request.rawBody = text;
    parseJson(request, body as string, (error, value) => {
      if (error) {
        // Valid JSON refused for a prototype key: checkJsonText names its path, and its item if any.
        if (!isValidJson(text)) return done(error, undefined);
        const { problem, items, raw } = checkJsonText(text, undefined, request.routeOptions.config.keepsField);
        if (problem === null) return done(new ValidationError(FORBIDDEN_PROTOTYPE), undefined);
        if (!items.size || !request.routeOptions.config.answersEachItem) return done(new ValidationError(problem), undefined);
        request.itemProblems = items;
        request.rawField = raw;
        return done(null, parseWithoutPrototypeKeys(text));
      }
      const { problem, items, raw } = checkJsonText(text, undefined, request.routeOptions.config.keepsField);
      request.rawField = raw;
      if (items.size && request.routeOptions.config.answersEachItem) request.itemProblems = items;
      else if (problem !== null) return done(new ValidationError(problem), undefined);
      done(null, value);
    });
  };
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseKeepingText);
  app.addContentTypeParser('*', { parseAs: 'string' }, parseKeepingText);
}
