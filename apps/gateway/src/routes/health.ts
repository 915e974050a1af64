import type { FastifyInstance } from 'fastify';
import type { Db } from '@operator/db';
import type { Redis } from '@operator/queue';

const CHECK_TIMEOUT_MS = 2000;

async function probe(check: () => Promise<unknown>): Promise<'up' | 'down'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return 'up';
  } catch {
    return 'down';
  } finally {
    clearTimeout(timer);
  }
}

export async function healthRoutes(app: FastifyInstance, { db, redis }: { db: Db; redis: Redis }) {
  app.get('/health/live', async () => ({ status: 'ok' }));

  app.get('/health/ready', async (_request, reply) => {
    const [postgres, redisState] = await Promise.all([probe(() => db.$queryRaw`SELECT 1`), probe(() => redis.ping())]);
    const ready = postgres === 'up' && redisState === 'up';
    if (ready) return { status: 'ready', postgres, redis: redisState };
    return reply.code(503).send({ error: 'not ready', postgres, redis: redisState });
  });
}
