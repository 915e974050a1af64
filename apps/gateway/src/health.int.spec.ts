import { TcpProxy, until } from '@operator/testing';
import { Harness } from './test/harness';

// Readiness is what a load balancer asks before it sends traffic: it must say 503 promptly while
// PostgreSQL is unreachable (refused, or silent behind a partition) and 200 as soon as it is back.
describe('/health/ready while PostgreSQL is cut', () => {
  let proxy: TcpProxy;
  let h: Harness;

  const ready = async () => {
    const started = Date.now();
    const response = await h.app.inject({ method: 'GET', url: '/health/ready' });
    return { status: response.statusCode, body: response.json(), retryAfter: response.headers['retry-after'], ms: Date.now() - started };
  };

  beforeAll(async () => {
    proxy = await TcpProxy.forUrl(process.env.DATABASE_URL!).start();
    h = await Harness.open({ DATABASE_URL: proxy.urlFor(process.env.DATABASE_URL!) });
  });
  afterAll(async () => {
    await proxy.resume();
    await h.close();
    await proxy.stop();
  });
  afterEach(() => proxy.resume());

  it('answers 200 with both stores up', async () => {
    expect(await ready()).toMatchObject({ status: 200, body: { status: 'ready', postgres: 'up', redis: 'up' } });
    expect(Object.keys((await ready()).body).sort()).toEqual(['postgres', 'redis', 'status']);
  });

  it('answers 503 at once while connections are refused, and 200 once PostgreSQL is back', async () => {
    await ready();
    await proxy.stop();
    const down = await ready();
    // On PORT: the error shape, naming the store down and no address, and when to ask again.
    expect(down).toMatchObject({ status: 503, body: { error: 'not ready: postgres down', code: 503 }, retryAfter: '5' });
    expect(Object.keys(down.body).sort()).toEqual(['code', 'error']);
    expect(down.ms).toBeLessThan(1000);
    // Asked again, it still answers (the pool keeps no broken connection).
    expect((await ready()).status).toBe(503);

    await proxy.resume();
    await until(async () => (await ready()).status === 200, 'readiness once PostgreSQL is back', 5000);
  });

  it('answers 503 within its check timeout while PostgreSQL does not answer, and 200 after', async () => {
    await ready();
    proxy.partition();
    const down = await ready();
    expect(down).toMatchObject({ status: 503, body: { error: 'not ready: postgres down', code: 503 } });
    expect(down.ms).toBeLessThan(3000);

    await proxy.resume();
    await until(async () => (await ready()).status === 200, 'readiness once the partition heals', 5000);
  });
});
