import { v7 as uuidv7 } from 'uuid';
import { redisUrlConnection } from '@operator/config';
import { closeDb, createDb, readDeliveries, registerDevice, type Db } from '@operator/db';
import { createApnsProvider } from '@operator/provider-apns';
import { createProviderRegistry, type ProviderRegistry } from '@operator/providers';
import { closePushQueues, createProducerRedis, createPushQueues, createSendWorker, createWorkerRedis, type PushQueues, type RedisClient, type SendJobPolicy } from '@operator/queue';
import { apnsToken, FakeApns, pushRequest, testTls, uniqueBrandId, uniqueName, until, type ApnsAnswer } from '@operator/testing';
import { acceptMessages } from './accept';
import { createSendRecorder, type SendRecorder } from './outcomes';
import { processSendJob, type SendDeps } from './send';
import { specSendDeps } from './test/send-deps';
import { silent } from './test/web-push-fixture';

// What waits when a provider asks to wait is what its answer is about, never the queue: a 429 about
// one device token defers that delivery alone, a credential over its quota pauses that brand's
// client alone, and every Retry-After is cut to PUSH_RETRY_AFTER_MAX_MS. Two brands, each with its
// own APNs credential (its own fake APNs and signing key), over real TLS, PostgreSQL and Redis.

const CAP_MS = 400;
const TOPIC = 'com.example.casino';
const HOUR = '3600';
const tooManyRequests: ApnsAnswer = { status: 429, reason: 'TooManyRequests', headers: { 'retry-after': HOUR } };
const tooManyTokenUpdates: ApnsAnswer = { status: 429, reason: 'TooManyProviderTokenUpdates', headers: { 'retry-after': HOUR } };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('back-off scoped to what it is about (PostgreSQL, Redis, two APNs over TLS)', () => {
  let db: Db;
  let producer: RedisClient;
  let connection: RedisClient;
  let apns: { a: FakeApns; b: FakeApns };
  let brand: { a: number; b: number };
  let registry: ProviderRegistry;
  let queues: PushQueues;
  let prefix: string;
  let recorder: SendRecorder;

  beforeAll(async () => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 6 });
    producer = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
    await new Promise((resolve) => producer.once('ready', resolve));
    const [a, b] = await Promise.all([FakeApns.start(), FakeApns.start()]);
    apns = { a, b };
  });

  afterAll(async () => {
    await Promise.all([apns.a.close(), apns.b.close()]);
    producer.disconnect();
    await closeDb(db);
  });

  beforeEach(() => {
    prefix = uniqueName('test-back-off');
    queues = createPushQueues(producer, prefix);
    recorder = createSendRecorder({ db, log: silent, leaseMs: 60000 });
    connection = createWorkerRedis(redisUrlConnection(process.env.REDIS_URL!));
    brand = { a: uniqueBrandId(), b: uniqueBrandId() };
    const credential = (fake: FakeApns) => ({ key: fake.key, keyId: fake.keyId, teamId: fake.teamId, topic: TOPIC, production: false, host: fake.host, port: fake.port });
    registry = createProviderRegistry({
      name: 'apns',
      brandCredentials: new Map([
        [String(brand.a), credential(apns.a)],
        [String(brand.b), credential(apns.b)],
      ]),
      create: (options) => createApnsProvider({ ...options, ca: testTls().ca }),
      retryAfterMaxMs: CAP_MS,
    });
  });

  afterEach(async () => {
    await recorder.close();
    await registry.close();
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(queues);
    connection.disconnect();
  });

  const deps = (): SendDeps => specSendDeps({ db, provider: 'apns', providerFor: (brandId) => registry.providerFor(brandId), recorder, retryAfterMaxMs: CAP_MS });
  const job = (pushIds: string[], attempt = 1, maxAttempts = 4) => ({ pushIds, attempt, maxAttempts, enqueuedAt: Date.now() });

  /** An iPhone of `player` at `of`'s brand, whose APNs answers the next sends to it as scripted. */
  async function device(of: 'a' | 'b', player: string, ...answers: ApnsAnswer[]) {
    const token = apnsToken();
    if (answers.length) apns[of].respond(token, ...answers);
    const { device: row } = await registerDevice(db, uuidv7(), { brandId: BigInt(brand[of]), userId: player, provider: 'apns', platform: 'ios', token, p256dh: null, auth: null });
    return { token, deviceId: row.id };
  }

  /** One push to `player`, accepted as the gateway does: in a send job of its own. */
  async function accept(of: 'a' | 'b', player: string, sendPolicy: SendJobPolicy = { attempts: 4, backoffMs: 20 }) {
    const deps = { db, redis: producer, queues, jobMaxMessages: 100, sendPolicy };
    const [outcome] = await acceptMessages(deps, [pushRequest(brand[of], player)], {});
    if (outcome.kind !== 'accepted') throw new Error(`push not accepted: ${outcome.kind}`);
    return outcome.pushId;
  }

  /** A delivery as it stands (no try recorded yet: pending). */
  const delivery = async (pushId: string, deviceId: string) => (await readDeliveries(db.pool, [pushId])).find((d) => d.deviceId === deviceId)!;
  const message = (pushId: string) => db.message.findFirstOrThrow({ where: { id: pushId } });

  it('defers only the device that answered 429 for an hour: the rest of its job and the next job are sent at once; it is retried after the cap and fails on the last attempt', async () => {
    const player = uniqueName('player');
    const busy = await device('a', player, tooManyRequests, tooManyRequests, tooManyRequests);
    const calm = await device('a', player);
    const first = await accept('a', player, { attempts: 3, backoffMs: 20 });
    const worker = createSendWorker('apns', (run) => processSendJob(deps(), run), { connection, prefix, concurrency: 2, backoffMs: 20 });
    try {
      // The first run sends to both devices: one is sent, the other waits for the job's next attempt.
      await until(async () => {
        const [sent, deferred] = await Promise.all([delivery(first, calm.deviceId), delivery(first, busy.deviceId)]);
        return sent.status === 'sent' && deferred.status === 'pending' && deferred.errorCode === 'rate-limited';
      }, 'one device sent and the other deferred');

      // The queue is not paused: a push accepted now, in a job of its own, goes out meanwhile.
      const other = uniqueName('player');
      const phone = await device('a', other);
      const second = await accept('a', other);
      await until(async () => (await delivery(second, phone.deviceId)).status === 'sent', 'the next job to be sent while the 429 waits');

      // Each deferral uses an attempt, so the device that answers 429 for ever fails in the end.
      await until(async () => (await delivery(first, busy.deviceId)).status === 'failed', 'the deferred delivery to fail on its last attempt');
      expect(await delivery(first, busy.deviceId)).toMatchObject({ status: 'failed', errorCode: 'rate-limited', error: 'APNs 429 TooManyRequests', attempts: 3 });
      // Retried after the capped wait (at least that, as asked, but not the hour).
      const tries = apns.a.requestsFor(busy.token).map((request) => request.at);
      expect(tries).toHaveLength(3);
      for (let i = 1; i < tries.length; i += 1) expect(tries[i] - tries[i - 1]).toBeGreaterThanOrEqual(CAP_MS);
      expect(apns.a.requestsFor(calm.token)).toHaveLength(1);
      expect(await message(first)).toMatchObject({ status: 'sent' });
    } finally {
      await worker.close();
    }
  });

  it.each([
    ['a 429', tooManyRequests, 'APNs 429 TooManyRequests'],
    ['a 503', { status: 503, reason: 'ServiceUnavailable', headers: { 'retry-after': '7200' } }, 'APNs 503 ServiceUnavailable'],
  ])("cuts the wait %s's Retry-After asks for to the cap", async (_what, answer, reason) => {
    const player = uniqueName('player');
    const phone = await device('a', player, answer);
    const pushId = await accept('a', player);
    expect(await processSendJob(deps(), job([pushId]))).toEqual({ kind: 'retry', reason, delayMs: CAP_MS });
    expect(await delivery(pushId, phone.deviceId)).toMatchObject({ status: 'pending', error: reason });
  });

  it('honours a Retry-After under the cap as asked', async () => {
    const player = uniqueName('player');
    await device('a', player, { status: 429, reason: 'TooManyRequests', headers: { 'retry-after': '0.25' } });
    const pushId = await accept('a', player);
    expect(await processSendJob(deps(), job([pushId]))).toEqual({ kind: 'retry', reason: 'APNs 429 TooManyRequests', delayMs: 250 });
  });

  it('fails a device still answering 429 on the last attempt, keeping its code and reason', async () => {
    const player = uniqueName('player');
    const busy = await device('a', player, tooManyRequests, tooManyRequests);
    const pushId = await accept('a', player);
    expect(await processSendJob(deps(), job([pushId], 1, 2))).toMatchObject({ kind: 'retry' });
    expect(await processSendJob(deps(), job([pushId], 2, 2))).toEqual({ kind: 'done', sent: 0, failed: 1, dropped: 0 });
    expect(await delivery(pushId, busy.deviceId)).toMatchObject({ status: 'failed', errorCode: 'rate-limited', error: 'APNs 429 TooManyRequests' });
    expect(await message(pushId)).toMatchObject({ status: 'failed', error: 'rate-limited' });
  });

  it("pauses the client of a credential over its quota, for the cap at most, while the other brand's pushes are sent", async () => {
    const player = uniqueName('player');
    await device('a', player, tooManyTokenUpdates);
    const first = await accept('a', player);
    expect(await processSendJob(deps(), job([first]))).toEqual({ kind: 'retry', reason: 'APNs 429 TooManyProviderTokenUpdates', delayMs: CAP_MS });

    // Brand A's next push is answered without reaching APNs, and waits for what is left of the pause.
    const later = uniqueName('player');
    const waiting = await device('a', later);
    const second = await accept('a', later);
    const held = await processSendJob(deps(), job([second]));
    expect(held).toMatchObject({ kind: 'retry', reason: expect.stringContaining('apns credential paused over its quota: APNs 429 TooManyProviderTokenUpdates') });
    const left = held.kind === 'retry' ? held.delayMs : Number.NaN;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(CAP_MS);
    expect(apns.a.requestsFor(waiting.token)).toHaveLength(0);
    expect(await delivery(second, waiting.deviceId)).toMatchObject({ status: 'pending', errorCode: 'rate-limited' });

    // Brand B has a credential of its own: sent at once.
    const elsewhere = uniqueName('player');
    const phone = await device('b', elsewhere);
    const pushB = await accept('b', elsewhere);
    expect(await processSendJob(deps(), job([pushB]))).toEqual({ kind: 'done', sent: 1, failed: 0, dropped: 0 });
    expect(apns.b.requestsFor(phone.token)).toHaveLength(1);

    // Once the pause is over (the cap, not the hour APNs asked for), brand A sends again.
    await sleep(left + 20);
    expect(await processSendJob(deps(), job([second], 2))).toEqual({ kind: 'done', sent: 1, failed: 0, dropped: 0 });
    expect(apns.a.requestsFor(waiting.token)).toHaveLength(1);
  });
});
