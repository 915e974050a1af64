import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { BadRequest, DeadLetterListSchema, Forbidden, LimitQuerySchema, RedriveSchema, RedrivenSchema, TooLarge, Unauthorized, Unavailable } from '@operator/contract';
import { listDeadLetters, redriveDeadLetters, type Db, type Reads } from '@operator/db';
import { brandFilter } from '../brands';
import { orUnavailable } from './unavailable';

const TAGS = ['Back office: webhooks'];

/**
 * Events the CRM refused or that outlived WEBHOOK_MAX_AGE: list them, and send them again. A key
 * bound to brands sees and redrives its brands' pushes' only (see listDeadLetters).
 */
export const deadLetterRoutes: FastifyPluginAsyncTypebox<{ db: Db; reads: Reads; maxAgeMs: number }> = async (app, { db, reads, maxAgeMs }) => {
  app.get(
    '/v1/webhooks/dead-letters',
    {
      schema: {
        tags: TAGS,
        summary: 'Events the CRM refused, or that outlived WEBHOOK_MAX_AGE',
        querystring: LimitQuerySchema,
        response: { 200: DeadLetterListSchema, 400: BadRequest, 401: Unauthorized, 403: Forbidden, 503: Unavailable },
      },
    },
    async (request) => {
      const limit = Math.min(1000, Math.max(1, Number(request.query.limit ?? 100)));
      const brands = brandFilter(request.brands);
      const rows = await orUnavailable(reads.run((replica) => listDeadLetters(replica.pool, limit, brands)));
      return {
        events: rows.map((row) => ({
          event_id: row.id,
          topic: row.topic,
          push_id: row.pushId,
          status: row.status,
          attempts: row.attempts,
          last_error: row.lastError,
          occurred_at: row.occurredAt.toISOString(),
        })),
      };
    },
  );

  app.post(
    '/v1/webhooks/dead-letters/redrive',
    {
      schema: {
        tags: TAGS,
        summary: 'Send dead letters again, with a fresh WEBHOOK_MAX_AGE',
        body: RedriveSchema,
        response: { 200: RedrivenSchema, 400: BadRequest, 401: Unauthorized, 403: Forbidden, 413: TooLarge, 503: Unavailable },
      },
    },
    async (request) => ({ redriven: await orUnavailable(redriveDeadLetters(db.pool, maxAgeMs, request.body.event_ids, brandFilter(request.brands))) }),
  );
};
