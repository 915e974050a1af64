import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { LiveSchema, NotReadySchema, ReadySchema, Unavailable } from '@operator/contract';
import { pingDb, type Db } from '@operator/db';
import { probe } from '@operator/metrics';
import type { RedisClient } from '@operator/queue';

const TAGS = ['Health'];

export const healthRoutes: FastifyPluginAsyncTypebox<{ db: Db; redis: RedisClient }> = async (app, { db, redis }) => {
  app.get(
    '/health/live',
    { schema: { tags: TAGS, summary: 'The process runs', response: { 200: LiveSchema, 503: Unavailable } } },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    { schema: { tags: TAGS, summary: 'PostgreSQL and Redis answer', response: { 200: ReadySchema, 503: NotReadySchema } } },
    async (_request, reply) => {
      const [postgres, redisState] = await Promise.all([probe(() => pingDb(db)), probe(() => redis.ping())]);
      const ready = postgres === 'up' && redisState === 'up';
      if (ready) return { status: 'ready' as const, postgres, redis: redisState };
      return reply.code(503).send({ error: 'not ready', postgres, redis: redisState });
    },
  );
};
