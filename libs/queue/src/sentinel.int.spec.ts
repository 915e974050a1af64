import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisConnectionOf, type RedisConnection } from '@operator/config';
import { freePort, redisCli, startSentinelTopology, uniqueName, until, type SentinelTopology } from '@operator/testing';
import { queueKey } from './jobs';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { createProducerRedis, createWorkerRedis, redisErrorListener, redisServer, type RedisClient } from './redis';
import { createSendWorker } from './send-worker';
import { publish, subscribe } from './pubsub';

// A master, a replica and three Sentinels of their own. The apps' connections are made from
// REDIS_SENTINELS, with REDIS_URL on a port where nothing listens: they must find the master
// through the Sentinels, follow a failover within seconds, and leave a server that became a
// replica under them (READONLY) for the master.

jest.setTimeout(90000);

describe('Redis through Sentinel', () => {
  const dir = mkdtempSync(join(tmpdir(), 'operator-sentinel-'));
  const prefix = uniqueName('test-sentinel');
  const processed: string[] = [];
  const warnings: string[] = [];
  const log = { info: () => undefined, warn: (_details: object, message: string) => void warnings.push(message), error: (_details: object, message: string) => void warnings.push(message) };
  let topology: SentinelTopology;
  let connection: RedisConnection;
  let producer: RedisClient;
  let workerRedis: RedisClient;
  let queues: PushQueues;
  let worker: ReturnType<typeof createSendWorker>;

  /** Enqueues one job for a new push; resolves with its push id, or rejects as the gateway would see it. */
  const enqueue = async () => {
    const pushId = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [pushId] }]);
    return pushId;
  };

  /** Tries to enqueue until it goes through; resolves with the push id and how long it took. */
  const enqueueWhenPossible = async (ms: number) => {
    const started = Date.now();
    const pushId = await until(() => enqueue().catch(() => undefined), 'an enqueue to succeed', ms);
    return { pushId, ms: Date.now() - started };
  };

  beforeAll(async () => {
    topology = await startSentinelTopology({ dir });
    const nothing = await freePort();
    ({ connection } = redisConnectionOf({ REDIS_URL: `redis://127.0.0.1:${nothing}`, REDIS_SENTINELS: topology.sentinelList, REDIS_SENTINEL_NAME: topology.masterName }));
    producer = createProducerRedis(connection, {}, log);
    workerRedis = createWorkerRedis(connection, {}, log);
    queues = createPushQueues(producer, prefix);
    worker = createSendWorker(
      'fcm',
      async (run) => {
        processed.push(...run.pushIds);
        return { kind: 'done' };
      },
      { connection: workerRedis, prefix, concurrency: 1, backoffMs: 10 },
    );
    worker.on('error', redisErrorListener(workerRedis));
    await until(() => producer.status === 'ready', 'the producer to connect');
  });

  afterAll(async () => {
    await worker?.close(true).catch(() => undefined);
    if (queues) await closePushQueues(queues).catch(() => undefined);
    producer?.disconnect();
    workerRedis?.disconnect();
    await topology?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reaches the master the Sentinels name, not the address of REDIS_URL', async () => {
    const master = await topology.currentMaster();
    expect(await redisServer(producer)).toEqual({ mode: 'sentinel', role: 'master', address: `127.0.0.1:${master.port}` });
    const pushId = await enqueue();
    await until(() => processed.includes(pushId), 'the job to be processed');
    expect(await redisCli(master.port, 'EXISTS', queueKey(prefix, 'push-fcm', 'meta'))).toBe('1');
  });

  it('enqueues on the new master within seconds of SENTINEL FAILOVER, and the worker runs a job added after it', async () => {
    const old = await topology.currentMaster();
    const next = await topology.failover();
    expect(next.port).not.toBe(old.port);

    const after = await enqueueWhenPossible(10000);
    expect(after.ms).toBeLessThan(10000);
    expect(await redisServer(producer)).toEqual({ mode: 'sentinel', role: 'master', address: `127.0.0.1:${next.port}` });
    await until(() => processed.includes(after.pushId), 'the job added after the failover to be processed', 20000);
    // The Sentinels make the old master a replica: anything left writing there would be refused.
    // Reconfiguring it, they kill its client connections, a probe's among them: that is "not yet".
    const role = () => redisCli(old.port, 'ROLE').catch(() => '');
    await until(async () => (await role()).startsWith('slave'), 'the old master to become a replica');
    // The outage was reported, once per connection at most, and never as an unexpected error.
    expect(warnings.filter((message) => message !== 'Redis connection lost; reconnecting')).toEqual([]);
  });

  it('leaves a server that became a replica under the connection (READONLY) for the master the Sentinels name', async () => {
    // After the failover above the Sentinels may still be reconfiguring the old master, killing its
    // clients: the producer is taken on the master once they are done.
    const old = await topology.settledMaster();
    await until(async () => producer.status === 'ready' && (await redisServer(producer).catch(() => undefined))?.address === `127.0.0.1:${old.port}`, 'the producer on the master');
    const next = await topology.swapRolesWithoutFailover();

    // Nothing disconnected the producer: the first write meets the replica...
    await expect(producer.set(`${prefix}:probe`, '1')).rejects.toThrow(/READONLY/);
    // ...and the connection goes to the master, so the next enqueues succeed there.
    const after = await enqueueWhenPossible(5000);
    expect(await redisServer(producer)).toEqual({ mode: 'sentinel', role: 'master', address: `127.0.0.1:${next.port}` });
    await until(() => processed.includes(after.pushId), 'a job added after the switch to be processed', 20000);
  });

  it("sends a worker connection's command that met a replica again to the master, without an error", async () => {
    const old = await topology.settledMaster();
    const direct = createWorkerRedis(connection);
    try {
      await until(() => direct.status === 'ready', 'the connection');
      expect(await redisServer(direct)).toMatchObject({ address: `127.0.0.1:${old.port}` });
      const next = await topology.swapRolesWithoutFailover();
      await expect(direct.set(`${prefix}:worker-probe`, 'written')).resolves.toBe('OK');
      expect(await redisCli(next.port, 'GET', `${prefix}:worker-probe`)).toBe('written');
    } finally {
      direct.disconnect();
    }
  });

  it('connects again when an attempt to reconnect is aborted, where ioredis would end the connection for good', async () => {
    // What the Sentinels' +switch-master does to a connection that is being made again after its
    // master was killed (the failoverDetector aborts the attempt); here the abort is asked directly.
    const client = createProducerRedis(connection);
    try {
      await until(() => client.status === 'ready', 'the connection');
      const aborted = new Promise<void>((resolve) =>
        client.once('connecting', () => {
          client.disconnect(true);
          resolve();
        }),
      );
      client.disconnect(true);
      await aborted;
      await until(() => client.status === 'ready', 'the connection to be made again', 10000);
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
    }
  });
  it('keeps a subscription across SENTINEL FAILOVER: subscribed again on the new master, it hears what is published there', async () => {
    const channel = `spec:pubsub:${randomUUID()}`;
    const heard: string[] = [];
    let subscriptions = 0;
    const subscription = subscribe(connection, channel, (message) => heard.push(message), { onSubscribed: () => (subscriptions += 1) });
    try {
      await subscription.ready;
      const old = await topology.currentMaster();
      const next = await topology.failover();
      expect(next.port).not.toBe(old.port);
      // Told of the new subscription (the gate drops its answers then), and on the new master.
      await until(() => subscriptions >= 2, 'the subscription made again', 20000);
      await until(async () => (await redisCli(next.port, 'PUBLISH', channel, 'after')) === '1', 'the subscriber on the new master', 20000);
      await until(() => heard.includes('after'), 'the message published after the failover');
      // The producer fails fast while it reconnects (the gateway then answers 503 and is asked again).
      await until(async () => (await publish(producer, channel, 'through the producer').catch(() => 0)) === 1, 'a publish through the producer');
      await until(() => heard.includes('through the producer'), "the producer's message");
    } finally {
      await subscription.close();
    }
  });
});
