import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from '@sinclair/typebox';
import { LiveSchema, NotReadySchema, ReadySchema, Unavailable } from '@operator/contract';
import { pingDb, pingReads, type Db, type Reads } from '@operator/db';
import { probeStore, readiness } from '@operator/metrics';
import { redisReadiness, type RedisClient } from '@operator/queue';

const TAGS = ['Health'];

export const healthRoutes: FastifyPluginAsyncTypebox<{ db: Db; reads: Reads; redis: RedisClient }> = async (app, { db, reads, redis }) => {
  app.get(
    '/health/live',
    // Answered while the gateway sheds load: a busy process is alive, and restarting it would not help.
    { schema: { tags: TAGS, summary: 'The process runs', response: { 200: LiveSchema, 503: Unavailable } }, config: { shed: false } },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    { schema: { tags: TAGS, summary: 'PostgreSQL and the Redis master answer', response: { 200: ReadySchema, 503: NotReadySchema } } },
    async (_request, reply) => {
      // A replica down does not make the gateway unready: that would stop the writes too, while the
      // replica's reads go to the primary meanwhile (reads.ts). It is reported, beside the stores that count.
      const [{ ready, report }, replica] = await Promise.all([
        readiness({ postgres: () => pingDb(db), redis: () => redisReadiness(redis) }),
        reads.separate ? probeStore(() => pingReads(reads)) : undefined,
      ]);
      if (replica) report.postgres_read = replica.state;
      if (ready) return { status: 'ready' as const, ...(report as Omit<Static<typeof ReadySchema>, 'status'>) };
      return reply.code(503).send({ error: 'not ready', ...report });
    },
  );
};
