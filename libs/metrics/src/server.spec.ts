import { METRICS_CONTENT_TYPE } from './catalog';
import { StoreServer } from '@operator/readiness';
import { MetricsPortError, startMetricsServer, type MetricsServer } from './server';

describe('metrics server', () => {
  let postgres: 'up' | 'down' | 'silent';
  let redisRole: 'master' | 'replica';
  let server: MetricsServer;
  const get = async (path: string, method = 'GET') => {
    const response = await fetch(`http://127.0.0.1:${server.port}${path}`, { method });
    return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
  };

  beforeEach(async () => {
    postgres = 'up';
    redisRole = 'master';
    server = await startMetricsServer({
      port: 0,
      checks: {
        postgres: () => (postgres === 'up' ? Promise.resolve() : postgres === 'down' ? Promise.reject(new Error('down')) : new Promise(() => undefined)),
        redis: async () => new StoreServer(redisRole === 'master', { mode: 'sentinel', role: redisRole, address: '10.0.0.7:6379' }),
      },
    });
  });
  afterEach(() => server.close());

  it('serves the metrics in the exposition format', async () => {
    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.type).toBe(METRICS_CONTENT_TYPE);
    expect(metrics.text).toContain('# TYPE operator_messages_accepted_total counter');
  });

  it('is live, and ready while every store answers', async () => {
    expect(await get('/health/live')).toMatchObject({ status: 200, text: '{"status":"ok"}' });
    const ready = await get('/health/ready');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.text)).toEqual({ status: 'ready', postgres: 'up', redis: 'up', redis_server: { mode: 'sentinel', role: 'master', address: '10.0.0.7:6379' } });
  });

  it('is not ready while a store refuses, or does not answer within the check timeout', async () => {
    postgres = 'down';
    const refused = await get('/health/ready');
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.text)).toMatchObject({ error: 'not ready', postgres: 'down', redis: 'up' });

    postgres = 'silent';
    const started = Date.now();
    const silent = await get('/health/ready');
    expect(silent.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('is not ready while a store answers from a server it cannot use, and names that server', async () => {
    redisRole = 'replica';
    const replica = await get('/health/ready');
    expect(replica.status).toBe(503);
    expect(JSON.parse(replica.text)).toEqual({ error: 'not ready', postgres: 'up', redis: 'down', redis_server: { mode: 'sentinel', role: 'replica', address: '10.0.0.7:6379' } });
  });

  it('is not ready once the app shuts down, and still live', async () => {
    server.shuttingDown();
    const ready = await get('/health/ready');
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.text)).toEqual({ error: 'not ready', reason: 'shutting down' });
    expect((await get('/health/live')).status).toBe(200);
  });

  it('answers 404 elsewhere and 405 to other methods', async () => {
    expect((await get('/nothing')).status).toBe(404);
    expect((await get('/constructor')).status).toBe(404);
    expect((await get('/metrics', 'POST')).status).toBe(405);
  });

  it('refuses a port in use with one line naming METRICS_PORT', async () => {
    const second = startMetricsServer({ port: server.port, checks: {} });
    await expect(second).rejects.toThrow(MetricsPortError);
    await expect(second).rejects.toThrow(`METRICS_PORT ${server.port} is already in use: set METRICS_PORT to a free port (0 takes any)`);
  });
});
