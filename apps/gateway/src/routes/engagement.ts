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
import { isValidTrackingToken, KnownStatuses, pushAcceptedAt, recordEngagement } from '@operator/push';
import { orUnavailable } from './unavailable';

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST, OPTIONS',
  'access-control-allow-headers': 'content-type',
  'access-control-max-age': '86400',
};

const TAGS = ['Devices: engagement'];

/** Reports from the player's device, with the push's tracking token instead of a key; open to any origin. */
export const engagementRoutes: FastifyPluginAsyncTypebox<{ db: Db; trackingSecret: string; tokenTtlMs: number }> = async (app, { db, trackingSecret, tokenTtlMs }) => {
  const known = new KnownStatuses();

  app.options(
    '/v1/push/:push_id/events',
    {
      schema: { tags: TAGS, summary: 'CORS preflight: any origin may report', params: PushIdParamsSchema, response: { 204: Type.Null({ description: 'Allowed' }), 413: OpenRouteTooLarge } },
      bodyLimit: OPEN_ROUTE_BODY_LIMIT_BYTES,
    },
    // A page on a public site may call an API on a private address (an intranet gateway): Chromium
    // asks first (Private Network Access), and is told yes.
    async (request, reply) => {
      if (request.headers['access-control-request-private-network'] === 'true') reply.header('access-control-allow-private-network', 'true');
      return reply.code(204).headers(CORS).send(null);
    },
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
          403: errorResponse('The tracking token is not the one of this push, or it has expired (TRACKING_TOKEN_TTL after the push was accepted)'),
          404: errorResponse('No push has this id'),
          409: errorResponse('The push was not sent to any device (not yet, or it failed on every device): nothing is recorded'),
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
      // Every push id is a UUIDv7: one that is not was never a push.
      const acceptedAt = pushAcceptedAt(pushId);
      if (acceptedAt === undefined) return reply.code(404).send({ error: `no push ${pushId}` });
      if (Date.now() - acceptedAt > tokenTtlMs) return reply.code(403).send({ error: 'tracking token has expired' });
      const { type } = request.body;
      const status = known.settled(pushId, type);
      if (status !== undefined) return { push_id: pushId, status, changed: false };
      const result = await orUnavailable(inTransaction(db, (sql) => recordEngagement(sql, pushId, type)));
      if (!result.found) return reply.code(404).send({ error: `no push ${pushId}` });
      if (!result.sent) return reply.code(409).send({ error: `push ${pushId} was not sent to any device (its status is ${result.status}); nothing is recorded` });
      known.remember(pushId, result.status);
      return { push_id: pushId, status: result.status, changed: result.changed };
    },
  );
};
