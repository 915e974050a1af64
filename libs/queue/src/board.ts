import type { FastifyPluginAsync } from 'fastify';
import type { PushQueues } from './push-queues';

/**
 * The queue dashboard (bull-board) over the push queues, as a fastify plugin to register with
 * the prefix `basePath`. It can retry, promote and remove jobs: guard it with the internal key.
 */
export function queueBoardPlugin(queues: PushQueues, basePath: string): FastifyPluginAsync {
  return async (app) => {
    // Loaded here, not with the library: the workers share it and never serve the dashboard.
    const [{ createBullBoard }, { BullMQAdapter }, { FastifyAdapter }] = await Promise.all([
      import('@bull-board/api'),
      import('@bull-board/api/bullMQAdapter'),
      import('@bull-board/fastify'),
    ]);
    const serverAdapter = new FastifyAdapter().setBasePath(basePath);
    createBullBoard({
      queues: Object.values(queues).map((queue) => new BullMQAdapter(queue)),
      serverAdapter,
      options: { uiConfig: { boardTitle: 'Push queues' } },
    });
    await app.register(serverAdapter.registerPlugin());
  };
}
