import { randomUUID } from 'node:crypto';
import { redisUrlConnection } from '@operator/config';
import { createProducerRedis } from './redis';
import { closePushQueues, createPushQueues, enqueueSendJobs, type PushQueues } from './push-queues';
import { PROVIDER_NAMES } from '@operator/provider-registry';
import { PUSH_QUEUES, queueKey, sendPushJobId } from './jobs';

describe('push queues (Redis)', () => {
  const redis = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
  const prefix = `test-queue-${randomUUID()}`;
  let queues: PushQueues;

  beforeAll(async () => {
    await new Promise((resolve) => redis.once('ready', resolve));
    queues = createPushQueues(redis, prefix);
  });
  afterAll(async () => {
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true })));
    await closePushQueues(queues);
    redis.disconnect();
  });

  it('names one queue per provider', () => {
    expect(Object.fromEntries(Object.entries(queues).map(([provider, queue]) => [provider, queue.name]))).toEqual(PUSH_QUEUES);
    expect(Object.keys(PUSH_QUEUES)).toEqual([...PROVIDER_NAMES]);
    for (const name of PROVIDER_NAMES) expect(PUSH_QUEUES[name]).toBe(`push-${name}`);
  });

  it('derives job ids from the pushes, so adding the same job again is a no-op', async () => {
    const one = [randomUUID()];
    const many = [randomUUID(), randomUUID(), randomUUID()];
    await enqueueSendJobs(queues, [{ provider: 'apns', pushIds: one }, { provider: 'apns', pushIds: many }]);
    await enqueueSendJobs(queues, [{ provider: 'apns', pushIds: one }, { provider: 'apns', pushIds: many }]);

    const jobs = await queues.apns.getJobs(['wait']);
    expect(jobs.map((job) => job.id).sort()).toEqual([sendPushJobId(one), sendPushJobId(many)].sort());
    expect(sendPushJobId(one)).toBe(`push-${one[0]}`);
    expect(sendPushJobId(many)).toBe(`push-${many[0]}-n3`);
    const job = jobs.find((j) => j.id === sendPushJobId(many))!;
    expect(job.data).toEqual({ pushIds: many });
    expect(job.opts.attempts).toBeGreaterThan(1);
    expect(job.opts.backoff).toMatchObject({ type: 'provider' });
  });

  it('stores a lone job as it stores one of several: the same options, and added again it is a no-op', async () => {
    const lone = [randomUUID()];
    const several = [[randomUUID()], [randomUUID(), randomUUID()]];
    await enqueueSendJobs(queues, [{ provider: 'hms', pushIds: lone }]);
    await enqueueSendJobs(queues, [{ provider: 'hms', pushIds: lone }]);
    await enqueueSendJobs(queues, several.map((pushIds) => ({ provider: 'hms' as const, pushIds })));

    const jobs = await queues.hms.getJobs(['wait']);
    expect(jobs.map((job) => job.id).sort()).toEqual([lone, ...several].map((pushIds) => sendPushJobId(pushIds)).sort());
    const byId = new Map(jobs.map((job) => [job.id, job]));
    const alone = byId.get(sendPushJobId(lone))!;
    const among = byId.get(sendPushJobId(several[0]))!;
    expect(alone.name).toBe(among.name);
    expect(alone.data).toEqual({ pushIds: lone });
    const { jobId: aloneId, ...aloneOptions } = alone.opts;
    const { jobId: amongId, ...amongOptions } = among.opts;
    expect([aloneId, amongId]).toEqual([sendPushJobId(lone), sendPushJobId(several[0])]);
    expect(aloneOptions).toEqual(amongOptions);
    expect(aloneOptions).toMatchObject({ attempts: 8, backoff: { type: 'provider', delay: 1000 } });
  });

  it('puts each job in its provider queue only', async () => {
    const pushIds = [randomUUID()];
    await enqueueSendJobs(queues, [{ provider: 'webpush', pushIds }]);
    expect((await queues.webpush.getJob(sendPushJobId(pushIds)))?.data).toEqual({ pushIds });
    expect(await queues.fcm.getJob(sendPushJobId(pushIds))).toBeUndefined();
  });

  it("keeps each queue's keys under a hash tag of its own, and its waiting list where KEDA reads it", async () => {
    const pushIds = [randomUUID()];
    await enqueueSendJobs(queues, [{ provider: 'fcm', pushIds }, { provider: 'apns', pushIds }, { provider: 'webpush', pushIds }]);
    for (const queue of Object.values(PUSH_QUEUES)) {
      const keys = await redis.keys(`*${prefix}*${queue}*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) expect(key.startsWith(`{${prefix}:${queue}}:${queue}:`)).toBe(true);
    }
    expect(await redis.lrange(queueKey(prefix, 'push-fcm', 'wait'), 0, -1)).toContain(sendPushJobId(pushIds));
  });
});
