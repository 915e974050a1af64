import { Type } from '@sinclair/typebox';
import { OPEN_ROUTE_BODY_LIMIT_BYTES } from './limits';

// Every refusal of the gateway is `{"error": "..."}`. One schema per meaning, so the OpenAPI page
// says, for each status a route can answer, when it does.

/** A refusal, described for this route and status. */
export const errorResponse = (description: string, extra: object = {}) => Type.Object({ error: Type.String() }, { description, ...extra });

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
