import { v7 as uuidv7 } from 'uuid';
import { redisUrlConnection } from '@operator/config';
import { PUSH_TUNING } from '@operator/provider-registry';
import { closeDb, createDb, registerDevice, type Db } from '@operator/db';
import { createFcmProvider } from '@operator/provider-fcm';
import type { PushProvider } from '@operator/providers';
import { closePushQueues, createProducerRedis, createPushQueues, createSendWorker, createWorkerRedis, type PushQueues, type RedisClient } from '@operator/queue';
import { FakeFcm, fcmToken, pushRequest, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { acceptMessages } from './accept';
import { createSendRecorder, type SendRecorder } from './outcomes';
import { processSendJob } from './send';
import { silent } from './test/web-push-fixture';

// A push worker's sends in flight follow what its provider allows, not a fixed product of jobs and
// messages: the worker as it runs by default (its row of the tuning table, BullMQ, PostgreSQL),
// against a local FCM over TLS that holds every answer for a while and counts the sends it holds.

/** What a worker kept in flight at most before: PUSH_WORKER_CONCURRENCY x PUSH_WORKER_PARALLEL_MESSAGES, 10 x 16. */
const OLD_PRODUCT = 160;

describe('sends in flight of one worker (PostgreSQL, Redis, a far FCM over TLS)', () => {
  let db: Db;
  let producer: RedisClient;
  let connection: RedisClient;
  let queues: PushQueues;
  let recorder: SendRecorder;
  let fake: FakeFcm;
  let provider: PushProvider;

  beforeAll(async () => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 8 });
    producer = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
    await new Promise((resolve) => producer.once('ready', resolve));
  });

  afterAll(async () => {
    producer.disconnect();
    await closeDb(db);
  });

  let prefix: string;
  beforeEach(() => {
    prefix = uniqueName('test-in-flight');
    queues = createPushQueues(producer, prefix);
    recorder = createSendRecorder({ db, log: silent, leaseMs: 60000 });
    connection = createWorkerRedis(redisUrlConnection(process.env.REDIS_URL!));
  });

  afterEach(async () => {
    await recorder.close();
    await provider.close();
    await fake.close();
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(queues);
    connection.disconnect();
  });

  /** `count` one-device pushes, accepted as the gateway does: in jobs of 100 messages. */
  async function accept(count: number): Promise<string[]> {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    await registerDevice(db, uuidv7(), { brandId: BigInt(brand), userId: player, provider: 'fcm', platform: 'android', token: fcmToken(), p256dh: null, auth: null });
    const deps = { db, redis: producer, queues, jobMaxMessages: 100, sendPolicy: { attempts: 4, backoffMs: 50 } };
    const outcomes = await acceptMessages(deps, Array.from({ length: count }, () => pushRequest(brand, player)), {});
    return outcomes.map((outcome) => {
      if (outcome.kind !== 'accepted') throw new Error(`push not accepted: ${outcome.kind}`);
      return outcome.pushId;
    });
  }

  /** Runs the FCM worker with its default tuning until every push is sent. */
  async function drain(pushIds: string[]) {
    const tuning = PUSH_TUNING.fcm;
    const worker = createSendWorker(
      'fcm',
      (run) =>
        processSendJob(
          {
            db,
            provider: 'fcm',
            providerFor: () => provider,
            log: silent,
            recorder,
            leaseMs: 60000,
            visibilityGraceMs: 30000,
            parallelMessages: tuning.parallelMessages,
            trackingSecret: 'test-tracking-secret',
            retryAfterMaxMs: 300000,
          },
          run,
        ),
      { connection, prefix, concurrency: tuning.workerConcurrency, backoffMs: 50 },
    );
    try {
      await until(async () => (await db.message.count({ where: { id: { in: pushIds }, status: 'sent' } })) === pushIds.length, 'every push to be sent', 60000);
    } finally {
      await worker.close();
    }
  }

  it('keeps far more than the old 160 sends in flight when FCM allows them, within 100 streams on each of 8 connections', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 100, answerDelayMs: 500 });
    provider = createFcmProvider({ serviceAccount: fake.serviceAccount, httpAgent: fake.agent, maxConnections: PUSH_TUNING.fcm.providerConnections });
    const pushIds = await accept(1500);
    await drain(pushIds);
    expect(fake.delivered).toHaveLength(1500);
    expect(fake.peakInFlight).toBeGreaterThan(2 * OLD_PRODUCT);
    expect(fake.peakInFlight).toBeLessThanOrEqual(800);
    expect(fake.peakStreamsPerConnection).toBeLessThanOrEqual(100);
    expect(fake.sessions).toBeLessThanOrEqual(8);
  });

  it('never goes past what the server announces on each connection nor the connection cap', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 30, answerDelayMs: 300, holdUntilInFlight: 90 });
    provider = createFcmProvider({ serviceAccount: fake.serviceAccount, httpAgent: fake.agent, maxConnections: 3 });
    const pushIds = await accept(600);
    await drain(pushIds);
    expect(fake.delivered).toHaveLength(600);
    expect(fake.peakStreamsPerConnection).toBe(30);
    expect(fake.peakBusyConnections).toBe(3);
    expect(fake.peakInFlight).toBe(90);
    expect(fake.sessions).toBe(3);
  });
});
