import { fcmToken, pushRequest, TcpProxy, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { Harness, openBehindProxies } from './test/harness';


describe('when a store is down', () => {
  let redisProxy: TcpProxy;
  let pgProxy: TcpProxy;
  let h: Harness;
  let brand: number;
  let player: string;

  let proxied: Awaited<ReturnType<typeof openBehindProxies>>;

  beforeAll(async () => {
    proxied = await openBehindProxies();
    ({ h, redis: redisProxy, postgres: pgProxy } = proxied);
  });
  afterAll(() => proxied.close());

  beforeEach(async () => {
    await proxied.heal();
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
  });

  const expect503 = (response: { statusCode: number; headers: Record<string, unknown>; json(): unknown }) => {
    expect(response.statusCode).toBe(503);
    expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
    expect(response.headers['retry-after']).toBeDefined();
  };

  describe('Redis', () => {
    it('answers 503 to single and batch, stores nothing, and accepts the retry once Redis is back', async () => {
      const request = pushRequest(brand, player);
      await redisProxy.stop();
      await until(() => h.stores.redis.status !== 'ready', 'the client to see Redis gone');

      expect503(await h.single(request));
      expect503(await h.batch([request, pushRequest(brand, player)]));
      expect(await h.messageRows(brand)).toEqual([]);
      const ready = await h.app.inject({ method: 'GET', url: '/health/ready' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual({ error: 'not ready: redis down', code: 503 });

      await redisProxy.resume();
      await until(() => h.stores.redis.status === 'ready', 'Redis to reconnect');
      const retried = await h.single(request);
      expect(retried.statusCode).toBe(200);
      const rows = await h.messageRows(brand);
      expect(rows.map((r) => r.id)).toEqual([retried.json().push_id]);
      expect((await h.jobs('fcm')).filter((job) => job.data.pushIds.includes(retried.json().push_id))).toHaveLength(1);
    });

    it('answers 503 and rolls the message back when Redis stops answering mid-request', async () => {
      const request = pushRequest(brand, player);
      redisProxy.partition();

      expect503(await h.single(request));
      // The job never reached Redis before the timeout, so the transaction was rolled back.
      expect(await h.messageRows(brand)).toEqual([]);

      await redisProxy.resume();
      const retried = await h.single(request);
      expect(retried.statusCode).toBe(200);
      expect(await h.messageRows(brand)).toHaveLength(1);
    });
  });

  describe('PostgreSQL', () => {
    it('answers 503 to single, batch and device registration, and recovers when it is back', async () => {
      const request = pushRequest(brand, player);
      await pgProxy.stop();

      expect503(await h.single(request));
      expect503(await h.batch([request]));
      expect503(await h.internal('POST', '/v1/devices', { user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() }));
      expect503(await h.internal('GET', `/v1/players/${player}/devices`));
      const ready = await h.app.inject({ method: 'GET', url: '/health/ready' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual({ error: 'not ready: postgres down', code: 503 });

      await pgProxy.resume();
      const retried = await h.single(request);
      expect(retried.statusCode).toBe(200);
      expect(await h.messageRows(brand)).toHaveLength(1);
    });

    it('answers 503 when PostgreSQL goes away in the middle of a request', async () => {
      const request = pushRequest(brand, player);
      pgProxy.partition();
      const pending = h.single(request);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await pgProxy.stop();
      expect503(await pending);

      await pgProxy.resume();
      const retried = await h.single(request);
      expect(retried.statusCode).toBe(200);
      expect(await h.messageRows(brand)).toHaveLength(1);
    });
  });
});
