import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { GatewayConfig } from '@operator/config';
import { primaryReads } from '@operator/db';
import { MetricsPortError } from '@operator/metrics';
import type { GatewayDeps } from './deps';
import { apiDocsPages } from './docs';
import { metricsRoutes } from './routes/metrics';
import { queueDashboardRoutes } from './routes/queue-dashboard';

/** In production the operations routes move to METRICS_PORT, so whatever forwards PORT to the world shows none. */
export const operationsApart = (config: GatewayConfig) => config.NODE_ENV === 'production';

/** What the gateway serves its operators rather than the CRM; the queue dashboard behind an admin key. */
export const operationsRoutes: FastifyPluginAsync<GatewayDeps & { api: FastifyInstance }> = async (app, { config, db, reads, queues, api }) => {
  await app.register(metricsRoutes, { reads: reads ?? primaryReads(db), queues });
  await app.register(apiDocsPages(api));
  if (config.ADMIN_UI) await app.register(queueDashboardRoutes, { queues, keys: config.internalKeys.admin.filter((key) => key.brands === null).map(({ key }) => key) });
};

/** A port that cannot be listened on stops the start with one line that names it. */
export async function listenOperations(app: FastifyInstance, config: GatewayConfig) {
  try {
    await app.listen({ host: config.HOST, port: config.METRICS_PORT });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'EADDRINUSE' ? 'is already in use' : `cannot be listened on (${code ?? (error as Error).message})`;
    throw new MetricsPortError(`METRICS_PORT ${config.METRICS_PORT} ${why}: set METRICS_PORT to a free port (0 takes any)`);
  }
}
