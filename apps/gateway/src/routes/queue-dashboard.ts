import type { FastifyInstance } from 'fastify';
import { queueBoardPlugin, type PushQueues } from '@operator/queue';
import { browserKeyGuard } from '../auth';

export const QUEUE_DASHBOARD_PATH = '/admin/queues';

/**
 * The queue dashboard (bull-board) at /admin/queues, for the operator's people: an admin key
 * opens it, as X-Api-Key or as the password of HTTP Basic so a browser can log in. Its page, its
 * assets and its API calls are all behind the key.
 */
export async function queueDashboardRoutes(app: FastifyInstance, { queues, keys }: { queues: PushQueues; keys: string[] }) {
  app.addHook('onRequest', browserKeyGuard(keys, 'Queue dashboard'));
  await app.register(queueBoardPlugin(queues, QUEUE_DASHBOARD_PATH), { prefix: QUEUE_DASHBOARD_PATH });
}
