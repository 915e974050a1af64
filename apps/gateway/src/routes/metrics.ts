import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { BALANCE_TOPIC, BONUS_TOPIC } from '@operator/bonus';
import { countCreditsByState, countDeadLetters, PUSH_STATUS_TOPIC, readOutboxBacklog, type Reads } from '@operator/db';
import { acceptedMessages, METRICS_CONTENT_TYPE, metricsText, observeHttpRequest, STORE_READ_TIMEOUT_MS, watchStores } from '@operator/metrics';
import { queueJobCounts, type PushQueues } from '@operator/queue';

export interface MetricsOptions {
  /** The store gauges are read where the reads that may lag go: a few seconds behind is fine for a gauge. */
  reads: Reads;
  queues: PushQueues;
}

const SINGLE_ROUTE = '/channels/push/single';

/** Counted here because a 400 may come from the schema, before any handler runs. */
export function observeRequests(app: FastifyInstance) {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url;
    observeHttpRequest(request.method, route ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    if (reply.statusCode === 400 && route === SINGLE_ROUTE) acceptedMessages('single', 'invalid', 1);
  });
}

/** No API key, like /health. */
export const metricsRoutes: FastifyPluginAsync<MetricsOptions> = async (app, { reads, queues }) => {
  const stores = watchStores(
    {
      queueJobs: () => queueJobCounts(Object.values(queues)),
      outbox: () => reads.run((db) => readOutboxBacklog(db, [PUSH_STATUS_TOPIC, BONUS_TOPIC, BALANCE_TOPIC], STORE_READ_TIMEOUT_MS)),
      deadLetters: () => reads.run((db) => countDeadLetters(db, STORE_READ_TIMEOUT_MS)),
      credits: () => reads.run((db) => countCreditsByState(db, STORE_READ_TIMEOUT_MS)),
    },
    { log: app.log },
  );

  app.get('/metrics', async (_request, reply) => {
    await stores.refresh();
    return reply.type(METRICS_CONTENT_TYPE).send(await metricsText());
  });
};
