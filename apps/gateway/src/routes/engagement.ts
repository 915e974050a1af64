import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { isUuid } from '@operator/contract';
import { inTransaction, recordEngagement, type Db } from '@operator/db';
import { isValidTrackingToken } from '@operator/push';
import { orUnavailable } from './unavailable';

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'POST, OPTIONS',
  'access-control-allow-headers': 'content-type',
  'access-control-max-age': '86400',
};

const EngagementSchema = Type.Object({
  type: Type.Union([Type.Literal('delivered'), Type.Literal('opened'), Type.Literal('clicked')]),
  token: Type.String({ minLength: 1, maxLength: 128 }),
});

/**
 * Reports from the player's device (app or service worker): no API key, the push's tracking token
 * instead. Open to any origin, so a service worker on the operator's site can call it.
 */
export async function engagementRoutes(app: FastifyInstance, { db, trackingSecret }: { db: Db; trackingSecret: string }) {
  app.options('/v1/push/:push_id/events', async (_request, reply) => reply.code(204).headers(CORS).send());

  app.post<{ Params: { push_id: string }; Body: { type: 'delivered' | 'opened' | 'clicked'; token: string } }>(
    '/v1/push/:push_id/events',
    {
      schema: { body: EngagementSchema },
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
}
