import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisConnectionOf } from '@operator/config';
import { redisCli, startCluster, uniqueName, until, type RedisClusterTopology } from '@operator/testing';
import { queueKey } from './jobs';
import { Cluster, createWorkerRedis, type RedisClient } from './redis';

// A BullMQ worker whose wait for a job on a Cluster outlasts its watchdog (a killed master's slot,
// retried until the takeover) disconnects its blocking connection and connects it again. Done
// while the slot has no master (cluster_state:fail), that connect must settle: the worker's main
// loop awaits it, and so does worker.close(). Seen in the HA suite: both APNs workers waited on it
// for good after the kill of the master of push-apns's slot.

jest.setTimeout(90000);

/** Longest a connect may take once the replica took over. */
const SETTLE_MS = 10000;

describe("a worker's Cluster connection made again while its slot has no master", () => {
  const dir = mkdtempSync(join(tmpdir(), 'operator-cluster-reconnect-'));
  const prefix = uniqueName('test-cluster-reconnect');
  const log = { info: () => undefined, warn: () => undefined, error: () => undefined };
  let cluster: RedisClusterTopology;
  let redis: RedisClient;

  beforeAll(async () => {
    cluster = await startCluster({ dir, masters: 3, replicas: 1 });
    const { connection, problems } = redisConnectionOf({ REDIS_CLUSTER_NODES: cluster.nodeList });
    expect(problems).toEqual([]);
    redis = createWorkerRedis(connection, {}, log);
    await until(() => redis.status === 'ready', 'the worker connection to join the cluster', 15000);
  });

  afterAll(async () => {
    redis?.disconnect();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('settles its connect, as BullMQ does after its watchdog, and runs commands again', async () => {
    expect(redis).toBeInstanceOf(Cluster);
    const key = queueKey(prefix, 'push-fcm', 'marker');
    const killing = cluster.killMaster(key);
    const live = cluster.nodes.map((node) => node.port);
    // The other nodes take the killed master for failed: the cluster is down until its replica takes over.
    await until(
      async () => {
        for (const port of live) {
          const info = await redisCli(port, 'CLUSTER', 'INFO').catch(() => '');
          if (info.includes('cluster_state:fail')) return true;
        }
        return false;
      },
      'the cluster to be down for the killed master',
      15000,
    );

    // What BullMQ's resetBlockedConnection does: disconnect, wait for the end, connect again.
    await new Promise<void>((resolve) => {
      redis.once('end', () => resolve());
      redis.disconnect();
    });
    const connecting = (redis as InstanceType<typeof Cluster>).connect().then(
      () => 'connected',
      (error: Error) => `refused: ${error.message}`,
    );
    await killing;
    const outcome = await Promise.race([connecting, new Promise((resolve) => setTimeout(() => resolve('never settled'), SETTLE_MS))]);
    expect(outcome).not.toBe('never settled');

    await until(() => redis.status === 'ready', 'the connection to be ready again', SETTLE_MS);
    expect(await redis.set(key, '1')).toBe('OK');
  });
});
