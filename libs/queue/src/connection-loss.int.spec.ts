import { randomUUID } from 'node:crypto';
import { TcpProxy, uniqueName, until } from '@operator/testing';
import { redisUrlConnection } from '@operator/config';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { createProducerRedis, createWorkerRedis, redisErrorListener, type RedisClient } from './redis';
import { createSendWorker } from './send-worker';

// Redis goes away (every connection cut, reconnections refused) under a producer with its queues
// and a worker with its blocking connection, then comes back. Nothing may surface as an unhandled
// 'error' (ioredis and BullMQ print those with console.error), each connection reports the outage
// once and its end once, and jobs flow again.

interface Line {
  who: string;
  level: string;
  message: string;
}

describe('a Redis connection that drops', () => {
  const redisUrl = process.env.REDIS_URL!;
  const prefix = uniqueName('test-redis-loss');
  const lines: Line[] = [];
  const sink = (who: string) => {
    const line = (level: string) => (_details: object, message: string) => void lines.push({ who, level, message });
    return { info: line('info'), warn: line('warn'), error: line('error') };
  };
  const processed: string[] = [];
  let proxy: TcpProxy;
  let producer: RedisClient;
  let workerRedis: RedisClient;
  let queues: PushQueues;
  let worker: ReturnType<typeof createSendWorker>;
  let consoleError: jest.SpyInstance;

  beforeAll(async () => {
    consoleError = jest.spyOn(console, 'error');
    proxy = await TcpProxy.forUrl(redisUrl).start();
    producer = createProducerRedis(redisUrlConnection(proxy.urlFor(redisUrl)), {}, sink('producer'));
    workerRedis = createWorkerRedis(redisUrlConnection(proxy.urlFor(redisUrl)), {}, sink('worker'));
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
    await worker.waitUntilReady();
    await until(() => producer.status === 'ready', 'the producer to connect');
  });

  afterAll(async () => {
    await proxy.resume();
    await worker.close();
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(queues);
    producer.disconnect();
    workerRedis.disconnect();
    await proxy.stop();
    consoleError.mockRestore();
  });

  it('is reported once per connection, never unhandled, and jobs flow again once Redis is back', async () => {
    const before = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [before] }]);
    // Finished in Redis, not only run: a finish whose reply the cut loses is sent again and refused
    // (lost-reply.int.spec.ts), which is a report of its own.
    await until(async () => (await queues.fcm.getJobCounts('completed')).completed === 1, 'the first job');

    await proxy.stop();
    await until(() => producer.status !== 'ready' && workerRedis.status !== 'ready', 'the clients to see Redis gone');
    // Several reconnection attempts fail meanwhile (they come every 200 ms to 2 s).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await expect(enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [randomUUID()] }])).rejects.toThrow();

    await proxy.resume();
    await until(() => producer.status === 'ready' && workerRedis.status === 'ready', 'the clients to reconnect', 10000);
    const after = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [after] }]);
    await until(() => processed.includes(after), 'a job after the outage', 15000);

    const count = (who: string, level: string) => lines.filter((line) => line.who === who && line.level === level).length;
    expect({ producer: count('producer', 'warn'), worker: count('worker', 'warn') }).toEqual({ producer: 1, worker: 1 });
    expect(lines).toContainEqual({ who: 'producer', level: 'info', message: 'Redis connection is back' });
    expect(lines).toContainEqual({ who: 'worker', level: 'info', message: 'Redis connection is back' });
    expect(lines.filter((line) => line.level === 'error')).toEqual([]);
    expect(consoleError).not.toHaveBeenCalled();
  });
});
