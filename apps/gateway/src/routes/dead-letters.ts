import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { UUID_PATTERN } from '@operator/contract';
import { listDeadLetters, redriveDeadLetters, type Db } from '@operator/db';
import { orUnavailable } from './unavailable';

/** Events the CRM refused or that outlived WEBHOOK_MAX_AGE: list them, and send them again. */
export async function deadLetterRoutes(app: FastifyInstance, { db, maxAgeMs }: { db: Db; maxAgeMs: number }) {
  app.get<{ Querystring: { limit?: string } }>(
    '/v1/webhooks/dead-letters',
    { schema: { querystring: Type.Object({ limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$', errorMessage: 'must be a number' })) }) } },
    async (request) => {
      const rows = await orUnavailable(listDeadLetters(db.pool, Math.min(1000, Math.max(1, Number(request.query.limit ?? 100)))));
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

  app.post<{ Body: { event_ids?: string[] } }>(
    '/v1/webhooks/dead-letters/redrive',
    {
      schema: {
        body: Type.Object({
          event_ids: Type.Optional(Type.Array(Type.String({ pattern: UUID_PATTERN, errorMessage: 'must be an event id' }), { maxItems: 10000 })),
        }),
      },
    },
    async (request) => ({ redriven: await orUnavailable(redriveDeadLetters(db.pool, maxAgeMs, request.body.event_ids)) }),
  );
}
