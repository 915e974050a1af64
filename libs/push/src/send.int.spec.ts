import { v7 as uuidv7 } from 'uuid';
import { readDeliveries } from '@operator/db';
import { createSandboxProvider } from '@operator/providers';
import { metricsText } from '@operator/metrics';
import { createSendWorker, createWorkerRedis, type RedisClient } from '@operator/queue';
import { testTls, until } from '@operator/testing';
import { createWebPushProvider } from '@operator/provider-webpush';
import { redisUrlConnection } from '@operator/config';
import { createSendRecorder, type SendRecorder } from './outcomes';
import { processSendJob, type SendDeps } from './send';
import { specSendDeps } from './test/send-deps';
import { silent, WebPushFixture } from './test/web-push-fixture';

describe('sending pushes (PostgreSQL, Redis, a Web Push service over TLS)', () => {
  const t = new WebPushFixture('test-send');
  let recorder: SendRecorder;

  beforeAll(() => t.open());
  afterAll(() => t.close());
  beforeEach(() => {
    t.begin();
    recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 60000 });
  });
  afterEach(async () => {
    await recorder.close();
    await t.end();
  });

  const deps = (overrides: Partial<SendDeps> = {}): SendDeps => specSendDeps({ db: t.db, provider: 'webpush', providerFor: () => t.provider, recorder, ...overrides });
  const device = t.device.bind(t);
  const accept = (count = 1, policy = { attempts: 4, backoffMs: 50 }) => t.accept(count, policy, { web: { tag: 'promo', require_interaction: 'true' } });

  /** A push's deliveries as they stand, each with its device (null once removed). */
  const deliveries = async (pushId: string) => {
    const rows = await readDeliveries(t.db.pool, [pushId]);
    const devices = await t.db.device.findMany({ where: { id: { in: rows.flatMap((row) => (row.deviceId ? [row.deviceId] : [])) } } });
    return rows.map((row) => ({ ...row, device: devices.find((found) => found.id === row.deviceId) ?? null }));
  };
  const message = (pushId: string) => t.db.message.findFirstOrThrow({ where: { id: pushId } });
  const receivedBy = (id: string) => t.fake.received.filter((m) => m.id === id);
  const job = (pushIds: string[], attempt = 1, maxAttempts = 4) => ({ pushIds, attempt, maxAttempts, enqueuedAt: Date.now() });

  it('records each device: sent with the provider id, dead tokens failed and deactivated (only those)', async () => {
    const ok = await device();
    const gone = await device(410);
    const missing = await device(404);
    const [pushId] = await accept();

    const outcome = await processSendJob(deps(), job([pushId]));
    expect(outcome).toEqual({ kind: 'done', sent: 1, failed: 2, dropped: 0 });

    const rows = await deliveries(pushId);
    const byDevice = new Map(rows.map((row) => [row.deviceId, row]));
    expect(byDevice.get(ok.deviceId)).toMatchObject({ status: 'sent', errorCode: null, providerMessageId: expect.stringContaining('/') });
    expect(byDevice.get(gone.deviceId)).toMatchObject({ status: 'failed', errorCode: 'unregistered' });
    expect(byDevice.get(missing.deviceId)).toMatchObject({ status: 'failed', errorCode: 'unregistered' });
    expect(byDevice.get(ok.deviceId)!.device!.active).toBe(true);
    expect(byDevice.get(gone.deviceId)!.device).toMatchObject({ active: false, deactivatedReason: 'unregistered' });
    expect(byDevice.get(missing.deviceId)!.device).toMatchObject({ active: false });
    expect(await message(pushId)).toMatchObject({ status: 'sent', error: null });

    const [delivered] = receivedBy(ok.id);
    expect(delivered.payload).toMatchObject({ push_id: pushId, title: 'Weekend reload', options: { tag: 'promo', requireInteraction: true } });
  });

  it('writes each answer within the worker\'s record interval, while the job still waits for its slowest sends', async () => {
    // The push service answers the phone's first three pushes only after seconds, everything else at
    // once. A push's answers are recorded together, once its last device of the provider answered.
    const HELD = 3;
    const COUNT = 24;
    const slowProvider = createWebPushProvider({ vapid: t.vapid, ca: testTls().ca, allowedOrigins: t.allowedOrigins, timeoutMs: 20000 });
    const phone = await device(...Array.from({ length: HELD }, () => ({ status: 201, delayMs: 6000 })));
    await device();
    const pushIds = await accept(COUNT);
    try {
      let ended = false;
      const running = processSendJob(deps({ providerFor: () => slowProvider, parallelMessages: COUNT }), job(pushIds)).finally(() => (ended = true));
      const sent = async () => (await readDeliveries(t.db.pool, pushIds)).filter((d) => d.status === 'sent').length;
      await until(async () => (await sent()) >= 2 * (COUNT - HELD), 'the answers of every push but the held ones to be recorded', 5500);
      // Recorded while the job still waits for the held answers, not when it ends.
      expect(ended).toBe(false);
      expect(await sent()).toBe(2 * (COUNT - HELD));
      expect(t.fake.receivedFor(phone.id)).toHaveLength(COUNT);
      expect(await running).toEqual({ kind: 'done', sent: 2 * COUNT, failed: 0, dropped: 0 });
      expect(await sent()).toBe(2 * COUNT);
    } finally {
      await slowProvider.close();
    }
  }, 20000);

  it('counts each device of a provider call by outcome and error code, and the call by its first failure', async () => {
    const sample = async (line: string) => {
      const found = (await metricsText()).split('\n').find((candidate) => candidate.startsWith(`${line} `));
      return found === undefined ? 0 : Number(found.slice(line.length + 1));
    };
    const lines = [
      'operator_sends_total{provider="webpush",outcome="sent",error_code="none"}',
      'operator_sends_total{provider="webpush",outcome="dead-token",error_code="unregistered"}',
      'operator_sends_total{provider="webpush",outcome="payload",error_code="payload-too-large"}',
      'operator_send_duration_seconds_count{provider="webpush",outcome="dead-token"}',
      'operator_send_duration_seconds_count{provider="webpush",outcome="payload"}',
      'operator_send_duration_seconds_count{provider="webpush",outcome="sent"}',
    ];
    const before = await Promise.all(lines.map(sample));
    await device();
    await device(410);
    await device(404);
    await device(413);
    const [pushId] = await accept();
    await processSendJob(deps(), job([pushId]));
    const after = await Promise.all(lines.map(sample));
    const [sent, dead, tooLarge, deadCall, payloadCall, sentCall] = after.map((value, i) => value - before[i]);
    expect({ sent, dead, tooLarge, sentCall }).toEqual({ sent: 1, dead: 2, tooLarge: 1, sentCall: 0 });
    // One call, under the class of whichever failed device its results list first.
    expect([deadCall, payloadCall].sort()).toEqual([0, 1]);
  });

  it('fails the message with the reasons when no device accepted it', async () => {
    await device(410);
    await device(413);
    const [pushId] = await accept();
    await processSendJob(deps(), job([pushId]));
    expect(await message(pushId)).toMatchObject({ status: 'failed', error: 'payload-too-large, unregistered' });
  });

  it('never sends again to a device already recorded as sent when the job runs again', async () => {
    const ok = await device();
    const flaky = await device(500);
    const [pushId] = await accept();

    expect(await processSendJob(deps(), job([pushId], 1))).toMatchObject({ kind: 'retry' });
    expect((await deliveries(pushId)).map((d) => d.status).sort()).toEqual(['pending', 'sent']);
    expect(await message(pushId)).toMatchObject({ status: 'sent' });

    expect(await processSendJob(deps(), job([pushId], 2))).toMatchObject({ kind: 'done', sent: 1 });
    expect(await processSendJob(deps(), job([pushId], 3))).toMatchObject({ kind: 'done', sent: 0, failed: 0 });
    expect(receivedBy(ok.id)).toHaveLength(1);
    expect(receivedBy(flaky.id)).toHaveLength(1);
    expect((await deliveries(pushId)).every((d) => d.status === 'sent')).toBe(true);
  });

  it('fails transient errors for good on the last attempt', async () => {
    await device(503, 503);
    const [pushId] = await accept();
    expect(await processSendJob(deps(), job([pushId], 1, 2))).toMatchObject({ kind: 'retry' });
    expect(await processSendJob(deps(), job([pushId], 2, 2))).toMatchObject({ kind: 'done', failed: 1 });
    expect(await message(pushId)).toMatchObject({ status: 'failed', error: 'unavailable' });
  });

  it('fails the subscription a push service refuses (401/403) for that subscription only, without an alert', async () => {
    const refusing = await device(403, 401);
    const fine = await device();
    const pushIds = await accept(2);
    const outcome = await processSendJob(deps({ parallelMessages: 1 }), job(pushIds, 1, 3));
    expect(outcome).toMatchObject({ kind: 'done', sent: 2, failed: 2 });
    expect(receivedBy(fine.id)).toHaveLength(2);
    const mine = (await Promise.all(pushIds.map(deliveries))).flat().filter((d) => d.deviceId === refusing.deviceId);
    expect(mine.map((d) => [d.status, d.errorCode])).toEqual([
      ['failed', 'subscription-refused'],
      ['failed', 'subscription-refused'],
    ]);
    // The device is not taken for dead: the refusal may be the push service's, not the browser's.
    expect((await t.db.device.findUniqueOrThrow({ where: { id: refusing.deviceId } })).active).toBe(true);
  });

  it('stops at refused credentials when several subscriptions of one push service refuse them, and retries later', async () => {
    // A client of its own: refusals it remembers from other tests do not count.
    const provider = createWebPushProvider({ vapid: t.vapid, ca: testTls().ca, allowedOrigins: t.allowedOrigins, timeoutMs: 3000 });
    try {
      const phones = [await device(403), await device(403), await device(403)];
      const pushIds = await accept(3);
      const outcome = await processSendJob(deps({ parallelMessages: 1, providerFor: () => provider }), job(pushIds, 1, 3));
      expect(outcome).toMatchObject({ kind: 'retry', reason: expect.stringContaining('credentials refused') });
      // The first message reached the three subscriptions; the others were not tried with those credentials.
      expect(t.fake.requests.filter((r) => phones.some((phone) => phone.id === r.id))).toHaveLength(3);
      const all = (await Promise.all(pushIds.map(deliveries))).flat();
      expect(all.filter((d) => d.errorCode === 'auth' && d.status === 'pending').length).toBeGreaterThanOrEqual(7);
    } finally {
      await provider.close();
    }
  });

  it('fails a delivery once its own claims reach the attempts, even in a job enqueued again at attempt 1', async () => {
    const phone = await device(500, 500, 500);
    const [pushId] = await accept();
    // Twice a first attempt: the reconciler's job for a delivery whose job was lost starts over.
    expect(await processSendJob(deps(), job([pushId], 1, 2))).toMatchObject({ kind: 'retry' });
    expect(await deliveries(pushId)).toEqual([expect.objectContaining({ status: 'pending', attempts: 1 })]);
    expect(await processSendJob(deps(), job([pushId], 1, 2))).toMatchObject({ kind: 'done', failed: 1 });
    expect(await deliveries(pushId)).toEqual([expect.objectContaining({ status: 'failed', attempts: 2, errorCode: 'unavailable' })]);
    expect(t.fake.requests.filter((r) => r.id === phone.id)).toHaveLength(2);
  });

  it('lets a crashed worker’s lease lapse before sending those deliveries again', async () => {
    const phone = await device();
    const [pushId] = await accept();
    const { claimDeliveries } = await import('@operator/db');
    await claimDeliveries(t.db.pool, [pushId], 'webpush', 300); // a worker took a lease on it, then died

    expect(await processSendJob(deps({ leaseMs: 300 }), job([pushId]))).toMatchObject({ kind: 'wait' });
    expect(receivedBy(phone.id)).toHaveLength(0);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(await processSendJob(deps({ leaseMs: 300 }), job([pushId]))).toMatchObject({ kind: 'done', sent: 1 });
    expect(receivedBy(phone.id)).toHaveLength(1);
  });

  it('waits for messages not committed yet, and drops them once they can no longer appear', async () => {
    const unknown = uuidv7();
    expect(await processSendJob(deps(), { ...job([unknown]), enqueuedAt: Date.now() })).toMatchObject({ kind: 'wait' });
    expect(await processSendJob(deps(), { ...job([unknown]), enqueuedAt: Date.now() - 60000 })).toEqual({ kind: 'done', sent: 0, failed: 0, dropped: 1 });
  });

  it('fails the deliveries of a removed device without sending', async () => {
    const phone = await device();
    const [pushId] = await accept();
    await t.db.device.delete({ where: { id: phone.deviceId } });
    expect(await processSendJob(deps(), job([pushId]))).toMatchObject({ kind: 'done', sent: 0, failed: 1 });
    expect(await deliveries(pushId)).toEqual([expect.objectContaining({ status: 'failed', errorCode: 'device-inactive' })]);
    expect(receivedBy(phone.id)).toHaveLength(0);
  });

  it('records sandbox sends as sent', async () => {
    await device();
    const [pushId] = await accept();
    const sandbox = createSandboxProvider('webpush');
    await processSendJob(deps({ providerFor: () => sandbox }), job([pushId]));
    expect(await deliveries(pushId)).toEqual([expect.objectContaining({ status: 'sent', providerMessageId: expect.stringMatching(/^sandbox-/) })]);
  });

  describe('through the BullMQ worker', () => {
    let connection: RedisClient;
    beforeEach(() => {
      connection = createWorkerRedis(redisUrlConnection(process.env.REDIS_URL!));
    });
    afterEach(() => connection.disconnect());

    const startWorker = (overrides: Partial<SendDeps> = {}) =>
      createSendWorker('webpush', (run) => processSendJob(deps(overrides), run), { connection, prefix: t.prefix, concurrency: 2, backoffMs: 50 });

    it('retries a 5xx with backoff until it is sent', async () => {
      const flaky = await device(500, 502);
      const [pushId] = await accept();
      const worker = startWorker();
      try {
        await until(async () => (await message(pushId)).status === 'sent', 'the push to be sent');
        expect(t.fake.requests.filter((r) => r.id === flaky.id).map((r) => r.status)).toEqual([500, 502, 201]);
        const [row] = await deliveries(pushId);
        expect(row).toMatchObject({ status: 'sent', attempts: 3 });
      } finally {
        await worker.close();
      }
    });

    it('finishes the job in flight when closed (graceful shutdown)', async () => {
      const slow = await device({ status: 201, delayMs: 700 });
      const [pushId] = await accept();
      const worker = startWorker();
      await until(async () => t.fake.requests.some((r) => r.id === slow.id), 'the send to start');
      await worker.close();
      const [row] = await deliveries(pushId);
      expect(row.status).toBe('sent');
      expect(await message(pushId)).toMatchObject({ status: 'sent' });
    });
  });
});
