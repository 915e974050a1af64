import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { BadRequest, DeadLetterListSchema, Forbidden, LimitQuerySchema, RedriveSchema, RedrivenSchema, TooLarge, Unauthorized, Unavailable } from '@operator/contract';
import { listDeadLetters, redriveDeadLetters, type Db, type Reads } from '@operator/db';
import { orUnavailable } from './unavailable';

const TAGS = ['Back office: webhooks'];

/** Events the CRM refused or that outlived WEBHOOK_MAX_AGE: list them, and send them again. */
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
      const rows = await orUnavailable(reads.run((replica) => listDeadLetters(replica.pool, Math.min(1000, Math.max(1, Number(request.query.limit ?? 100))))));
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
    async (request) => ({ redriven: await orUnavailable(redriveDeadLetters(db.pool, maxAgeMs, request.body.event_ids)) }),
  );
};
