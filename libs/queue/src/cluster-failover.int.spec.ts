import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisConnectionOf } from '@operator/config';
import { redisCli, startCluster, uniqueName, until, type RedisClusterTopology } from '@operator/testing';
import { queueKey } from './jobs';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { createProducerRedis, createWorkerRedis, isConnectionLoss, redisErrorListener, type RedisClient } from './redis';
import { createSendWorker } from './send-worker';

// A Redis Cluster of three masters, each with a replica, of its own. kill -9 of the master serving
// the push-fcm queue's slot: until its replica takes over, the gateway's enqueues must fail at once
// (it answers 503 and the CRM retries), never wait; within seconds of the takeover they must go
// through again, and the worker must run what was added after it.

jest.setTimeout(90000);

/** Longest an enqueue may take, failed or not, for the gateway to answer within its deadline. */
const FAIL_FAST_MS = 3000;
/** Longest after the replica took over before an enqueue goes through. */
const RECOVERY_MS = 5000;

interface Attempt {
  started: number;
  ended: number;
  pushId?: string;
  error?: Error;
}

describe('Redis Cluster failover', () => {
  const dir = mkdtempSync(join(tmpdir(), 'operator-cluster-failover-'));
  const prefix = uniqueName('test-cluster-failover');
  const processed: string[] = [];
  const log = { info: () => undefined, warn: () => undefined, error: () => undefined };
  let cluster: RedisClusterTopology;
  let producer: RedisClient;
  let workerRedis: RedisClient;
  let queues: PushQueues;
  let worker: ReturnType<typeof createSendWorker>;

  /** Enqueues one job for a new push as the gateway does; resolves with its push id, or rejects. */
  const enqueue = async () => {
    const pushId = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [pushId] }]);
    return pushId;
  };

  beforeAll(async () => {
    cluster = await startCluster({ dir, masters: 3, replicas: 1 });
    const { connection, problems } = redisConnectionOf({ REDIS_CLUSTER_NODES: cluster.nodeList });
    expect(problems).toEqual([]);
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
    await until(() => producer.status === 'ready', 'the producer to join the cluster', 15000);
  });

  afterAll(async () => {
    await worker?.close(true).catch(() => undefined);
    if (queues) await closePushQueues(queues).catch(() => undefined);
    producer?.disconnect();
    workerRedis?.disconnect();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fails enqueues fast while the push-fcm slot has no master, and enqueues and runs jobs within seconds of its replica's takeover", async () => {
    const before = await enqueue();
    await until(() => processed.includes(before), 'a job added before the failover to run', 20000);

    // The gateway's enqueues, one after another, all through the failover.
    const attempts: Attempt[] = [];
    let stopped = false;
    const attempting = (async () => {
      while (!stopped) {
        const started = Date.now();
        let error: Error | undefined;
        const pushId = await enqueue().catch((caught: Error) => void (error = caught));
        attempts.push({ started, ended: Date.now(), pushId, error });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    const killedAt = Date.now();
    let promotedAt: number;
    try {
      const { killed, promoted } = await cluster.killMaster(queueKey(prefix, 'push-fcm', 'meta'));
      promotedAt = Date.now();
      expect(promoted.port).not.toBe(killed.port);
      await until(() => attempts.some((attempt) => attempt.pushId && attempt.started > promotedAt), 'an enqueue to go through after the takeover', RECOVERY_MS * 2);
      expect(await redisCli(promoted.port, 'EXISTS', queueKey(prefix, 'push-fcm', 'meta'))).toBe('1');
    } finally {
      stopped = true;
      await attempting;
    }

    const during = attempts.filter((attempt) => attempt.ended > killedAt);
    // The slot had no master for a while, and every enqueue then failed at once, as a lost
    // connection (the gateway's 503), not an error of its own (a 500).
    const failed = during.filter((attempt) => !attempt.pushId);
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.filter((attempt) => !isConnectionLoss(attempt.error!)).map((attempt) => attempt.error!.message)).toEqual([]);
    expect(Math.max(...during.map((attempt) => attempt.ended - attempt.started))).toBeLessThan(FAIL_FAST_MS);
    // Enqueues went through again within seconds of the takeover, and kept going through.
    const recovered = during.findIndex((attempt, i) => attempt.pushId && i > during.indexOf(failed[0]));
    expect(during[recovered].ended - promotedAt).toBeLessThan(RECOVERY_MS);
    expect(during.slice(recovered).filter((attempt) => !attempt.pushId)).toEqual([]);

    // The worker runs a job added after the takeover.
    const after = during[during.length - 1].pushId!;
    await until(() => processed.includes(after), 'a job added after the failover to run', 20000);
  });
});
