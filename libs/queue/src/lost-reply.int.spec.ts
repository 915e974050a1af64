import { randomUUID } from 'node:crypto';
import { TcpProxy, uniqueName, until } from '@operator/testing';
import { redisUrlConnection } from '@operator/config';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { createProducerRedis, createWorkerRedis, redisErrorListener, type RedisClient } from './redis';
import { createSendWorker } from './send-worker';

// A worker finishes a job, Redis runs the finish, and the connection is cut before the reply comes
// back. ioredis sends the finish again on the new connection, and BullMQ is told the job is no
// longer the worker's (its lock went with the finish). That is a warning, not an error: the job
// was finished once and is not run again.

describe('a job whose finish is run but whose reply is lost', () => {
  const redisUrl = process.env.REDIS_URL!;
  const prefix = uniqueName('test-lost-reply');
  const lines: { level: string; message: string; err?: string }[] = [];
  const line = (level: string) => (details: { err?: unknown }, message: string) =>
    void lines.push({ level, message, err: details.err instanceof Error ? details.err.message : String(details.err) });
  const sink = { info: line('info'), warn: line('warn'), error: line('error') };
  const processed: string[] = [];
  let holdOn = '';
  let proxy: TcpProxy;
  let producer: RedisClient;
  let workerRedis: RedisClient;
  let queues: PushQueues;
  let worker: ReturnType<typeof createSendWorker>;

  beforeAll(async () => {
    proxy = await TcpProxy.forUrl(redisUrl).start();
    producer = createProducerRedis(redisUrlConnection(redisUrl));
    workerRedis = createWorkerRedis(redisUrlConnection(proxy.urlFor(redisUrl)), {}, sink);
    queues = createPushQueues(producer, prefix);
    worker = createSendWorker(
      'fcm',
      async (run) => {
        processed.push(...run.pushIds);
        // Whatever Redis answers from here on waits: the finish below is run, its reply held.
        if (run.pushIds.includes(holdOn)) proxy.holdReplies();
        return { kind: 'done' };
      },
      { connection: workerRedis, prefix, concurrency: 1, backoffMs: 10 },
    );
    worker.on('error', redisErrorListener(workerRedis));
    await worker.waitUntilReady();
  });

  afterAll(async () => {
    await proxy.resume();
    await worker.close();
    await queues.fcm.obliterate({ force: true }).catch(() => undefined);
    await closePushQueues(queues);
    producer.disconnect();
    workerRedis.disconnect();
    await proxy.stop();
  });

  it('is reported as a warning, and the job is neither run again nor failed', async () => {
    holdOn = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [holdOn] }]);
    await until(async () => (await queues.fcm.getJobCounts('completed')).completed === 1, 'Redis to run the finish');
    expect(lines).toEqual([]);

    await proxy.stop();
    await proxy.resume();
    await until(() => lines.some((entry) => entry.level === 'warn' && /no longer held/.test(entry.message)), 'the finish sent again to be refused', 10000);

    const after = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [after] }]);
    // Finished in Redis, not only run (its processor returns before its finish is sent).
    await until(async () => (await queues.fcm.getJobCounts('completed')).completed === 2, 'a job after the lost reply to finish', 10000);

    expect(processed).toEqual([holdOn, after]);
    expect(await queues.fcm.getJobCounts('completed', 'failed', 'delayed', 'wait', 'active')).toEqual({ completed: 2, failed: 0, delayed: 0, wait: 0, active: 0 });
    expect(lines.filter((entry) => entry.level === 'error')).toEqual([]);
    expect(lines.find((entry) => /no longer held/.test(entry.message))?.err).toMatch(/^Missing lock for job /);
  });
});
