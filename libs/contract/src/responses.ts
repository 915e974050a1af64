import { Type, type Static } from '@sinclair/typebox';
import { OPEN_ROUTE_BODY_LIMIT_BYTES } from './limits';

// Every refusal is `{"error": "...", "code": <HTTP status>}`, the CRM's published error schema; one
// schema per meaning, so the OpenAPI page says when each status is answered.

const errorFields = {
  error: Type.String({ description: 'What went wrong' }),
  code: Type.Integer({ description: 'The HTTP status of the answer' }),
};

/** A handler may send `{ error }` alone: the gateway's error hook adds `code`. */
const refusal = (options: object) => Type.Unsafe<{ error: string; code?: number }>(Type.Object(errorFields, { additionalProperties: false, ...options }));

export const ErrorSchema = refusal({ $id: 'Error' });
export type ErrorBody = Static<typeof ErrorSchema>;

export const errorResponse = (description: string, extra: object = {}) => refusal({ description, ...extra });

export const BadRequest = errorResponse('The request is wrong: the message names the field or header and the rule');
export const Unauthorized = errorResponse("No credentials, or not those of this route's kind: the internal X-Api-Key for /v1, what CRM_AUTH enables for the CRM's routes");
export const Unavailable = errorResponse('A store cannot be reached, the gateway is shedding load, or it is closing: retry after Retry-After seconds', {
  headers: { 'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying' } },
});
/** The 503 of a route behind credentials: Unavailable's reasons, and wrong credentials from an address that keeps failing. */
export const UnavailableOrThrottled = errorResponse(
  'A store cannot be reached, the gateway is shedding load or closing, or this address has failed to authenticate AUTH_FAILURE_LIMIT times and sent wrong credentials again (right ones are still served): retry after Retry-After seconds',
  { headers: { 'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying' } } },
);
export const Forbidden = errorResponse('A device key (INTERNAL_DEVICE_KEYS): this route takes an admin key (INTERNAL_ADMIN_KEYS or INTERNAL_API_KEYS)');
export const TooLarge = errorResponse('The body is larger than BODY_LIMIT_BYTES');
export const OpenRouteTooLarge = errorResponse(`The body is larger than ${OPEN_ROUTE_BODY_LIMIT_BYTES} bytes, the limit of the routes open without a key`);
