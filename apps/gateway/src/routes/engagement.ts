import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  BadRequest,
  EngagementRecordedSchema,
  EngagementSchema,
  errorResponse,
  isUuid,
  OPEN_ROUTE_BODY_LIMIT_BYTES,
  OpenRouteTooLarge,
  PushIdParamsSchema,
  Unavailable,
} from '@operator/contract';
import { inTransaction, type Db } from '@operator/db';
import { isValidTrackingToken, recordEngagement } from '@operator/push';
import { orUnavailable } from './unavailable';

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST, OPTIONS',
  'access-control-allow-headers': 'content-type',
  'access-control-max-age': '86400',
};

const TAGS = ['Devices: engagement'];

/**
 * Reports from the player's device (app or service worker): no API key, the push's tracking token
 * instead. Open to any origin, so a service worker on the operator's site can call it; open to
 * anyone, so a body over OPEN_ROUTE_BODY_LIMIT_BYTES is refused before more of it is read.
 */
export const engagementRoutes: FastifyPluginAsyncTypebox<{ db: Db; trackingSecret: string }> = async (app, { db, trackingSecret }) => {
  app.options(
    '/v1/push/:push_id/events',
    {
      schema: { tags: TAGS, summary: 'CORS preflight: any origin may report', params: PushIdParamsSchema, response: { 204: Type.Null({ description: 'Allowed' }), 413: OpenRouteTooLarge } },
      bodyLimit: OPEN_ROUTE_BODY_LIMIT_BYTES,
    },
    async (_request, reply) => reply.code(204).headers(CORS).send(null),
  );

  app.post(
    '/v1/push/:push_id/events',
    {
      schema: {
        tags: TAGS,
        summary: 'A device reports that a push was delivered, opened or clicked',
        params: PushIdParamsSchema,
        body: EngagementSchema,
        response: {
          200: EngagementRecordedSchema,
          400: BadRequest,
          403: errorResponse('The tracking token is not the one of this push'),
          404: errorResponse('No push has this id'),
          413: OpenRouteTooLarge,
          503: Unavailable,
        },
      },
      bodyLimit: OPEN_ROUTE_BODY_LIMIT_BYTES,
      onRequest: async (_request, reply) => {
        reply.headers(CORS);
      },
    },
    async (request, reply) => {
      const pushId = request.params.push_id.toLowerCase();
      if (!isUuid(pushId)) return reply.code(404).send({ error: `no push ${pushId}` });
      if (!isValidTrackingToken(trackingSecret, pushId, request.body.token)) {
        return reply.code(403).send({ error: 'tracking token does not match this push' });
      }
      const result = await orUnavailable(inTransaction(db, (sql) => recordEngagement(sql, pushId, request.body.type)));
      if (!result.found) return reply.code(404).send({ error: `no push ${pushId}` });
      return { push_id: pushId, status: result.status, changed: result.changed };
    },
  );
};
