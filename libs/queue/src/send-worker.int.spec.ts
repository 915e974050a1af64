import { randomUUID } from 'node:crypto';
import { uniqueName, until } from '@operator/testing';
import { redisUrlConnection } from '@operator/config';
import { SEND_PUSH_JOB, type SendPushJob } from './jobs';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { createProducerRedis, createWorkerRedis, type RedisClient } from './redis';
import { createSendWorker } from './send-worker';

// A send job's payload is checked where the worker takes it: one that does not match
// SendPushJobSchema fails for good on its first attempt, is reported, and the worker goes on.

describe('a send worker given a malformed job (Redis)', () => {
  const prefix = uniqueName('test-send-worker');
  const errors: { details: Record<string, unknown>; message: string }[] = [];
  const log = { info: () => undefined, warn: () => undefined, error: (details: object, message: string) => void errors.push({ details: details as Record<string, unknown>, message }) };
  const handled: string[][] = [];
  let producer: RedisClient;
  let connection: RedisClient;
  let queues: PushQueues;
  let worker: ReturnType<typeof createSendWorker>;

  beforeAll(async () => {
    producer = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
    connection = createWorkerRedis(redisUrlConnection(process.env.REDIS_URL!));
    await new Promise((resolve) => producer.once('ready', resolve));
    queues = createPushQueues(producer, prefix);
    worker = createSendWorker(
      'fcm',
      async (run) => {
        handled.push(run.pushIds);
        return { kind: 'done' };
      },
      { connection, prefix, concurrency: 1, backoffMs: 10, log },
    );
    await worker.waitUntilReady();
  });

  afterAll(async () => {
    await worker.close();
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true })));
    await closePushQueues(queues);
    producer.disconnect();
    connection.disconnect();
  });

  it.each([
    ['no pushIds', {}, 'pushIds is required'],
    ['an empty list', { pushIds: [] }, 'pushIds must be array length to be greater or equal to 1'],
    ['an id that is not a UUID', { pushIds: ['not-a-uuid'] }, 'pushIds[0]'],
    ['ids that are not strings', { pushIds: [42] }, 'pushIds[0] must be a string'],
  ])('fails a job with %s for good, without retries, and keeps working', async (_name, data, problem) => {
    const jobId = uniqueName('malformed');
    await queues.fcm.add(SEND_PUSH_JOB, data as unknown as SendPushJob, { jobId, attempts: 5, backoff: { type: 'fixed', delay: 10 } });

    await until(async () => (await queues.fcm.getJobState(jobId)) === 'failed', 'the malformed job to fail');
    const job = (await queues.fcm.getJob(jobId))!;
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toContain(`malformed send job ${jobId}: ${problem}`);
    expect(errors).toContainEqual({ details: expect.objectContaining({ jobId, problem: expect.stringContaining(problem) }), message: 'malformed send job refused; failed without retry' });
    expect(handled.flat()).not.toContain('not-a-uuid');

    const pushId = randomUUID();
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds: [pushId] }]);
    await until(() => handled.some((pushIds) => pushIds.includes(pushId)), 'a well-formed job after it');
    expect(worker.isRunning()).toBe(true);
  });
});
