import { v7 as uuidv7 } from 'uuid';
import { redisUrlConnection } from '@operator/config';
import { closeDb, createDb, registerDevice, type Db } from '@operator/db';
import { closePushQueues, createProducerRedis, createPushQueues, type PushQueues, type RedisClient } from '@operator/queue';
import { FakeOneSignal, oneSignalSubscriptionId, pushRequest, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { acceptMessages } from './accept';
import { BundledWorker } from './test/bundled-worker';

// The OneSignal worker as it runs in production, a process of its own, killed with SIGKILL while
// its requests are on the wire: OneSignal takes them after the worker is gone. The worker started
// again sends those deliveries again with the same idempotency keys, so OneSignal answers them from
// its record and no subscription gets a push twice (for the other providers the bound is the sends
// in flight at the kill; for this one it is zero).

describe('a OneSignal worker killed with SIGKILL mid-batch', () => {
  let db: Db;
  let producer: RedisClient;
  let queues: PushQueues;
  let fake: FakeOneSignal;
  let workers: BundledWorker;
  const prefix = uniqueName('test-onesignal-kill');

  beforeAll(async () => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
    producer = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
    await new Promise((resolve) => producer.once('ready', resolve));
    queues = createPushQueues(producer, prefix);
    // Every request is taken 400 ms after it arrives: a kill finds several on the wire.
    fake = await FakeOneSignal.start({ answerDelayMs: 400 });
    workers = new BundledWorker('push-worker-onesignal');
  });

  afterAll(async () => {
    workers?.killAll();
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(queues);
    producer.disconnect();
    await fake.close();
    await closeDb(db);
  });

  const startWorker = () =>
    workers.start({
      QUEUE_PREFIX: prefix,
      ONESIGNAL_APP_ID: fake.appId,
      ONESIGNAL_REST_API_KEY: fake.restApiKey,
      ONESIGNAL_ENDPOINT: fake.origin,
      PUSH_WORKER_CONCURRENCY: '2',
      PUSH_WORKER_PARALLEL_MESSAGES: '10',
    });

  it('delivers every push once: the requests in flight at the kill are answered from OneSignal’s idempotency record', async () => {
    const COUNT = 120;
    const brand = uniqueBrandId();
    // Players of one OneSignal subscription each, as an app registers them.
    const players = Array.from({ length: 4 }, () => ({ userId: uniqueName('os-player'), subscription: oneSignalSubscriptionId() }));
    for (const { userId, subscription } of players) {
      await registerDevice(db, uuidv7(), { brandId: BigInt(brand), userId, provider: 'onesignal', platform: 'ios', token: subscription, p256dh: null, auth: null });
    }
    const requests = Array.from({ length: COUNT }, (_, i) => pushRequest(brand, players[i % players.length].userId));
    const outcomes = await acceptMessages({ db, redis: producer, queues, jobMaxMessages: 20, sendPolicy: { attempts: 8, backoffMs: 50 } }, requests, {});
    const pushIds = outcomes.map((outcome) => (outcome.kind === 'accepted' ? outcome.pushId : ''));
    expect(pushIds.every(Boolean)).toBe(true);

    const first = startWorker();
    await until(() => fake.delivered.length >= COUNT / 4 && fake.inFlight >= 5, 'a quarter of the pushes taken and more on the wire', 30000);
    // Counted as the kill is sent: once the worker is gone, the fake goes on answering them (400 ms after each came).
    const onTheWireAtKill = fake.inFlight;
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));

    startWorker();
    const settled = async () =>
      (await db.pool.query<{ open: number }>(`SELECT count(*)::int AS open FROM messages WHERE id = ANY($1::uuid[]) AND status <> 'sent'`, [pushIds])).rows[0].open === 0;
    await until(settled, 'every push to be sent after the kill', 45000);

    // Each push reached its player's subscription exactly once.
    const byPush = new Map<string, number>();
    for (const delivery of fake.delivered) byPush.set(delivery.pushId!, (byPush.get(delivery.pushId!) ?? 0) + 1);
    expect([...byPush.keys()].sort()).toEqual([...pushIds].sort());
    expect([...byPush.values()].filter((times) => times !== 1)).toEqual([]);
    expect(fake.duplicates()).toBe(0);
    // And that was the key's doing: requests on the wire at the kill were sent again and answered from the record.
    expect(onTheWireAtKill).toBeGreaterThan(0);
    expect(fake.idempotentRepeats).toBeGreaterThan(0);
  }, 90000);
});
