import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { join } from 'node:path';
import { fcmToken, freePort, pushRequest, startSentinelTopology, uniqueBrandId, uniqueName, until, type SentinelTopology } from '@operator/testing';
import { buildOperationsApp } from './app';
import { Harness } from './test/harness';

// The gateway on a Redis reached through three Sentinels (REDIS_URL on a port where nothing
// listens). While the master is killed and the Sentinels fail over, every push is answered 503
// (the CRM sends it again) or 200, never 500; readiness on the operations port names the server and its role; and pushes
// are accepted again on the new master within seconds.

jest.setTimeout(90000);

describe('the gateway while Redis fails over (Sentinel)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'operator-gateway-sentinel-'));
  let topology: SentinelTopology;
  let h: Harness;
  let brand: number;
  let player: string;

  let operations: FastifyInstance;

  /** Readiness as the operations port (METRICS_PORT) answers it, with the Redis server that answered. */
  const ready = async () => {
    const response = await operations.inject({ method: 'GET', url: '/health/ready' });
    return { status: response.statusCode, body: response.json() };
  };

  beforeAll(async () => {
    topology = await startSentinelTopology({ dir });
    h = await Harness.open({
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      REDIS_SENTINELS: topology.sentinelList,
      REDIS_SENTINEL_NAME: topology.masterName,
    });
    operations = buildOperationsApp({ ...h.stores, api: h.app });
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
  });

  afterAll(async () => {
    await operations?.close();
    await h?.close();
    await topology?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 503 or 200 while the master is killed and replaced, never 500, then 200 on the new master', async () => {
    const master = await topology.currentMaster();
    expect(await ready()).toEqual({
      status: 200,
      body: { status: 'ready', postgres: 'up', redis: 'up', redis_server: { mode: 'sentinel', role: 'master', address: `127.0.0.1:${master.port}` } },
    });
    expect((await h.single(pushRequest(brand, player))).statusCode).toBe(200);

    const statuses: number[] = [];
    let sending = true;
    const sender = (async () => {
      while (sending) {
        statuses.push((await h.single(pushRequest(brand, player))).statusCode);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const killedAt = Date.now();
    const next = await topology.killMaster();
    await until(async () => (await h.single(pushRequest(brand, player))).statusCode === 200, 'a push accepted on the new master', 15000);
    const backAfterMs = Date.now() - killedAt;
    sending = false;
    await sender;

    expect(statuses.filter((status) => status !== 200 && status !== 503)).toEqual([]);
    expect(statuses).toContain(503);
    // down-after-milliseconds (1 s), the election, and the reconnection.
    expect(backAfterMs).toBeLessThan(15000);
    expect(await ready()).toEqual({
      status: 200,
      body: { status: 'ready', postgres: 'up', redis: 'up', redis_server: { mode: 'sentinel', role: 'master', address: `127.0.0.1:${next.port}` } },
    });
  });
});
