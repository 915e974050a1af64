import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from '@sinclair/typebox';
import { LiveSchema, NotReadySchema, ReadySchema, Unavailable } from '@operator/contract';
import { pingDb, type Db } from '@operator/db';
import { readiness } from '@operator/metrics';
import { redisReadiness, type RedisClient } from '@operator/queue';

const TAGS = ['Health'];

export const healthRoutes: FastifyPluginAsyncTypebox<{ db: Db; redis: RedisClient }> = async (app, { db, redis }) => {
  app.get(
    '/health/live',
    { schema: { tags: TAGS, summary: 'The process runs', response: { 200: LiveSchema, 503: Unavailable } } },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    { schema: { tags: TAGS, summary: 'PostgreSQL and the Redis master answer', response: { 200: ReadySchema, 503: NotReadySchema } } },
    async (_request, reply) => {
      const { ready, report } = await readiness({
        postgres: () => pingDb(db),
        redis: () => redisReadiness(redis),
      });
      if (ready) return { status: 'ready' as const, ...(report as Omit<Static<typeof ReadySchema>, 'status'>) };
      return reply.code(503).send({ error: 'not ready', ...report });
    },
  );
};
