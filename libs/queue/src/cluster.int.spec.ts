import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisConnectionOf, type RedisConnection } from '@operator/config';
import type { ProviderName } from '@operator/contract';
import { startCluster, uniqueName, until, type RedisClusterTopology } from '@operator/testing';
import { PUSH_QUEUES, queueKey } from './jobs';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { createProducerRedis, createWorkerRedis, redisErrorListener, redisServer, type RedisClient } from './redis';
import { createSendWorker } from './send-worker';
import { publish, subscribe } from './pubsub';

// A Redis Cluster of three masters of its own, reached through REDIS_CLUSTER_NODES. BullMQ's
// scripts and MULTIs touch several keys of a queue at once, which a Cluster refuses (CROSSSLOT)
// unless they share a slot: every queue must take jobs and run them, each in a slot of its own.

jest.setTimeout(90000);

const PROVIDERS = Object.keys(PUSH_QUEUES) as ProviderName[];

describe('Redis Cluster', () => {
  const dir = mkdtempSync(join(tmpdir(), 'operator-cluster-'));
  const prefix = uniqueName('test-cluster');
  const processed = new Map<ProviderName, string[]>(PROVIDERS.map((provider) => [provider, []]));
  const errors: string[] = [];
  const log = { info: () => undefined, warn: () => undefined, error: (_details: object, message: string) => void errors.push(message) };
  let cluster: RedisClusterTopology;
  let connection: RedisConnection;
  let producer: RedisClient;
  const workerConnections: RedisClient[] = [];
  let queues: PushQueues;
  const workers: ReturnType<typeof createSendWorker>[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ dir, masters: 3 });
    const read = redisConnectionOf({ REDIS_CLUSTER_NODES: cluster.nodeList });
    expect(read.problems).toEqual([]);
    connection = read.connection;
    producer = createProducerRedis(connection, {}, log);
    queues = createPushQueues(producer, prefix);
    for (const provider of PROVIDERS) {
      const workerRedis = createWorkerRedis(connection, {}, log);
      workerConnections.push(workerRedis);
      const worker = createSendWorker(
        provider,
        async (run) => {
          processed.get(provider)!.push(...run.pushIds);
          return { kind: 'done' };
        },
        { connection: workerRedis, prefix, concurrency: 2, backoffMs: 10 },
      );
      worker.on('error', redisErrorListener(workerRedis));
      workers.push(worker);
    }
    await until(() => producer.status === 'ready', 'the producer to join the cluster', 15000);
  });

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.close(true).catch(() => undefined)));
    if (queues) await closePushQueues(queues).catch(() => undefined);
    producer?.disconnect();
    for (const connection of workerConnections) connection.disconnect();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('takes jobs on every push queue and runs them, with no CROSSSLOT', async () => {
    const sent = new Map(PROVIDERS.map((provider) => [provider, [randomUUID(), randomUUID()]]));
    // One addBulk (a pipeline) per queue, two jobs each, every queue at once: as the gateway enqueues.
    await enqueueSendJobs(
      queues,
      PROVIDERS.flatMap((provider) => sent.get(provider)!.map((pushId) => ({ provider, pushIds: [pushId] }))),
    );
    for (const provider of PROVIDERS) {
      await until(() => sent.get(provider)!.every((pushId) => processed.get(provider)!.includes(pushId)), `the ${provider} jobs to run`, 20000);
    }
    expect(errors).toEqual([]);
  });

  it("keeps each queue's keys in one slot, and the queues in different slots", async () => {
    const slots = new Map<string, number>();
    for (const queue of Object.values(PUSH_QUEUES)) {
      const own = await Promise.all(['wait', 'active', 'meta', 'id', 'events', 'completed', 'push-x'].map((key) => cluster.keySlot(queueKey(prefix, queue, key))));
      expect(new Set(own).size).toBe(1);
      slots.set(queue, own[0]);
    }
    expect(new Set(slots.values()).size).toBeGreaterThan(1);
  });

  it("hears on a subscription what is published through the cluster, whichever node each is on", async () => {
    const channel = `spec:pubsub:${randomUUID()}`;
    const heard: string[] = [];
    const subscription = subscribe(connection, channel, (message) => heard.push(message));
    await subscription.ready;
    // A node answers PUBLISH with its own subscribers only, and passes the message to the others.
    await publish(producer, channel, '["p1"]');
    await until(() => heard.length === 1, 'the message on the subscription');
    expect(heard).toEqual(['["p1"]']);
    await subscription.close();
  });

  it('reports the cluster as ready, with its masters', async () => {
    expect(await redisServer(producer)).toEqual({
      mode: 'cluster',
      role: 'master',
      address: cluster.nodes.map((node) => `${node.host}:${node.port}`).sort().join(','),
    });
  });
});
