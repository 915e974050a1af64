import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { LiveSchema, NotReadyDetailSchema, NotReadySchema, ReadyDetailSchema, ReadySchema, Unavailable } from '@operator/contract';
import { pingDb, pingReads, type Db, type Reads } from '@operator/db';
import { probeStore, readiness, withoutServers } from '@operator/readiness';
import { redisReadiness, type RedisClient } from '@operator/queue';
import { RETRY_AFTER_SECONDS } from '../errors';

const TAGS = ['Health'];

/** `servers`: name the Redis server that answered, as on the operations port (never on the public one). */
export const healthRoutes: FastifyPluginAsyncTypebox<{ db: Db; reads: Reads; redis: RedisClient; servers: boolean }> = async (app, { db, reads, redis, servers }) => {
  app.get(
    '/health/live',
    // Answered while the gateway sheds load: a busy process is alive, and restarting it would not help.
    { schema: { tags: TAGS, summary: 'The process runs', response: { 200: LiveSchema, 503: Unavailable } }, config: { shed: false } },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    {
      schema: {
        tags: TAGS,
        summary: 'PostgreSQL and the Redis master answer',
        response: servers ? { 200: ReadyDetailSchema, 503: NotReadyDetailSchema } : { 200: ReadySchema, 503: NotReadySchema },
      },
    },
    async (_request, reply) => {
      // A replica down does not make the gateway unready: that would stop the writes too, while its
      // reads go to the primary meanwhile. It is reported.
      const [{ ready, report: full }, replica] = await Promise.all([
        readiness({ postgres: () => pingDb(db), redis: () => redisReadiness(redis) }),
        reads.separate ? probeStore(() => pingReads(reads)) : undefined,
      ]);
      const report = servers ? full : withoutServers(full);
      if (replica) report.postgres_read = replica.state;
      if (ready) return reply.code(200).send({ status: 'ready' as const, ...(report as { postgres: 'up'; redis: 'up' }) });
      reply.code(503).header('retry-after', String(RETRY_AFTER_SECONDS));
      if (servers) return reply.send({ error: 'not ready', ...report });
      const down = ['postgres', 'redis'].filter((store) => report[store] !== 'up');
      return reply.send({ error: `not ready: ${down.join(' and ')} down` });
    },
  );
};
