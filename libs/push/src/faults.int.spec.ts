import { claimDeliveries, closeDb, createDb, lockMessages, readDeliveries, recordOutcomes, settleMessages } from '@operator/db';
import type { PushProvider } from '@operator/providers';
import { TcpProxy, until } from '@operator/testing';
import { createOutageClock } from './outage';
import { createSendRecorder } from './outcomes';
import { reconcileOnce, startReconciler, type Reconciler } from './reconcile';
import { processSendJob, type SendDeps } from './send';
import { specSendDeps } from './test/send-deps';
import { BundledWorker } from './test/bundled-worker';
import { silent, WebPushFixture } from './test/web-push-fixture';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('sending under faults: PostgreSQL cut, a worker killed, jobs lost by Redis', () => {
  const t = new WebPushFixture('test-faults');

  beforeAll(() => t.open());
  afterAll(() => t.close());
  beforeEach(() => t.begin());
  afterEach(() => t.end());

  /** A device of the player at the fake push service; answers its subscription id. */
  const device = async () => (await t.device()).id;
  const accept = (count: number) => t.accept(count);

  const statuses = async (pushIds: string[]) => (await readDeliveries(t.db.pool, pushIds)).map((d) => d.status);
  /** How many times each push reached the device. */
  const receipts = (subscription: string) => {
    const counts = new Map<string, number>();
    for (const message of t.fake.receivedFor(subscription)) {
      const pushId = (message.payload as { push_id: string }).push_id;
      counts.set(pushId, (counts.get(pushId) ?? 0) + 1);
    }
    return counts;
  };
  /** Other suites leave unsent pushes in the shared test database: out of the reconciler's way. */
  const outOfTheWay = async (pushIds: string[]) => {
    await t.db.pool.query(
      `UPDATE deliveries SET updated_at = now() + interval '1 hour' WHERE status = 'pending' AND NOT (message_id = ANY($1::uuid[]))`,
      [pushIds],
    );
    await t.db.pool.query(`UPDATE messages SET updated_at = now() + interval '1 hour' WHERE open AND NOT (id = ANY($1::uuid[]))`, [pushIds]);
  };
  const job = (pushIds: string[]) => ({ pushIds, attempt: 1, maxAttempts: 4, enqueuedAt: Date.now() });

  it('keeps an outcome through a PostgreSQL cut right after its send, and never sends it again', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(process.env.DATABASE_URL!).port || 5432)).start();
    const cutDb = createDb({ url: proxy.urlFor(process.env.DATABASE_URL!), poolSize: 3, connectTimeoutMs: 300 });
    const recorder = createSendRecorder({ db: cutDb, log: silent, leaseMs: 3000 });
    try {
      const phone = await device();
      const [pushId] = await accept(1);
      // The provider answers, then PostgreSQL goes away for a second before the outcome is written.
      const cutAfterSend: PushProvider = {
        name: 'webpush',
        async send(notification, targets) {
          const results = await t.provider.send(notification, targets);
          await proxy.stop();
          setTimeout(() => void proxy.resume(), 1000);
          return results;
        },
        close: async () => undefined,
      };
      const deps: SendDeps = {
        db: cutDb,
        provider: 'webpush',
        providerFor: () => cutAfterSend,
        log: silent,
        recorder,
        leaseMs: 3000,
        visibilityGraceMs: 30000,
        parallelMessages: 4,
        trackingSecret: 'test-tracking-secret',
        retryAfterMaxMs: 300000,
      };

      expect(await processSendJob(deps, job([pushId]))).toEqual({ kind: 'done', sent: 1, failed: 0, dropped: 0 });
      expect(await statuses([pushId])).toEqual(['sent']);

      // The job runs again after the lease (a retried or stalled job): nothing is left to send.
      await sleep(3100);
      expect(await processSendJob({ ...deps, providerFor: () => t.provider }, job([pushId]))).toEqual({ kind: 'done', sent: 0, failed: 0, dropped: 0 });
      expect(receipts(phone).get(pushId)).toBe(1);
    } finally {
      await recorder.close();
      await closeDb(cutDb);
      await proxy.stop();
    }
  });

  it("renews the lease of a job it holds, so no other worker takes its pushes while their outcomes wait to be written", async () => {
    const recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 1500 });
    try {
      await device();
      const pushIds = await accept(3);
      const claim = await claimDeliveries(t.db.pool, pushIds, 'webpush', 1500);
      recorder.hold(
        claim.leaseId,
        claim.deliveries.map((d) => d.id),
      );
      // Three leases pass; the renewals keep the lease fresh, so another worker's claim finds nothing.
      await sleep(4500);
      const other = await claimDeliveries(t.db.pool, pushIds, 'webpush', 1500);
      expect(other.deliveries).toHaveLength(0);
      expect(other.heldElsewhere).toBe(3);
    } finally {
      await recorder.close();
    }
  });

  it('gives back, at shutdown, the lease of a job with no outcome waiting to be written, and keeps what it sent', async () => {
    const recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 60000 });
    try {
      await device();
      const pushIds = await accept(3);
      const claim = await claimDeliveries(t.db.pool, pushIds, 'webpush', 60000);
      recorder.hold(
        claim.leaseId,
        claim.deliveries.map((d) => d.id),
      );
      const [sent, ...unsent] = claim.deliveries;
      await recorder.record([{ pushId: sent.messageId, outcome: { deliveryId: sent.id, status: 'sent', providerMessageId: null } }]);
      expect(await recorder.release()).toBe(1);
      expect((await statuses(pushIds)).sort()).toEqual(['pending', 'pending', 'sent']);
      expect(recorder.held).toBe(0);
      // Another worker takes the two unsent at once, not after the lease's time.
      const next = await claimDeliveries(t.db.pool, pushIds, 'webpush', 60000);
      expect(next.deliveries.map((d) => d.id).sort()).toEqual(unsent.map((d) => d.id).sort());
    } finally {
      await recorder.close();
    }
  });

  it('enqueues again the pushes whose job was lost, once, and they are sent', async () => {
    const phone = await device();
    const pushIds = await accept(3);
    await t.queues.webpush.obliterate({ force: true }); // Redis lost the job
    // A fourth push is claimed right now by a live worker: not stranded.
    const [busy] = await accept(1);
    await claimDeliveries(t.db.pool, [busy], 'webpush', 60000);
    await outOfTheWay([...pushIds, busy]);
    // Nothing has moved for these pushes for 10 s: past afterMs (5 s), which is long enough that the
    // second look below comes before it passes again, however loaded the machine.
    await t.db.pool.query(`UPDATE messages SET updated_at = now() - interval '10 seconds' WHERE id = ANY($1::uuid[])`, [[...pushIds, busy]]);
    await t.db.pool.query(`UPDATE deliveries SET updated_at = now() - interval '10 seconds' WHERE message_id = ANY($1::uuid[])`, [[...pushIds, busy]]);

    const reconcile = { db: t.db, queues: t.queues, provider: 'webpush' as const, log: silent, afterMs: 5000, leaseMs: 60000, jobMaxMessages: 2, sendPolicy: { attempts: 4, backoffMs: 50 } };
    expect((await reconcileOnce(reconcile)).sort()).toEqual([...pushIds].sort());
    expect(await reconcileOnce(reconcile)).toEqual([]); // marked: not again until afterMs passes without progress

    const jobs = (await t.queues.webpush.getJobs(['wait', 'delayed', 'prioritized'])).filter((j) => j.id!.includes('-r'));
    expect(jobs.flatMap((j) => j.data.pushIds).sort()).toEqual([...pushIds].sort());
    expect(jobs.map((j) => j.data.pushIds.length).sort()).toEqual([1, 2]);

    const recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 60000 });
    try {
      const deps = specSendDeps({ db: t.db, provider: 'webpush', providerFor: () => t.provider, recorder });
      for (const j of jobs) await processSendJob(deps, { pushIds: j.data.pushIds, attempt: 1, maxAttempts: 4, enqueuedAt: j.timestamp });
    } finally {
      await recorder.close();
    }
    expect(await statuses(pushIds)).toEqual(['sent', 'sent', 'sent']);
    expect([...receipts(phone).values()]).toEqual([1, 1, 1]);
  });

  it('takes pushes still waiting in the queue behind a backlog for waiting, not lost', async () => {
    await device();
    const pushIds = await accept(3);
    await outOfTheWay(pushIds);
    await sleep(300);
    // Past afterMs, with their job still in the queue: a campaign's tail waiting its turn.
    const reconcile = { db: t.db, queues: t.queues, provider: 'webpush' as const, log: silent, afterMs: 100, leaseMs: 60000, jobMaxMessages: 10, sendPolicy: { attempts: 4, backoffMs: 50 } };
    expect(await reconcileOnce(reconcile)).toEqual([]);
    await t.queues.webpush.obliterate({ force: true }); // now their job is lost
    expect((await reconcileOnce(reconcile)).sort()).toEqual([...pushIds].sort());
  });

  describe('an outage of PostgreSQL longer than the send lease, with a send held unrecorded', () => {
    /**
     * A worker claims two pushes and has their sends answered just as PostgreSQL goes away for two
     * and a half leases; a reconciler is cut off with it. PostgreSQL comes back for the reconciler
     * first and for the worker half a second later (a reconnection that takes longer, as behind a
     * PgBouncer that is still refusing some clients). Answers the pushes the reconciler enqueued
     * again, and their statuses once the worker has written its outcomes.
     */
    const outage = async (quietAfterOutageMs?: number) => {
      const port = Number(new URL(process.env.DATABASE_URL!).port || 5432);
      const workerProxy = await new TcpProxy('127.0.0.1', port).start();
      const reconcilerProxy = await new TcpProxy('127.0.0.1', port).start();
      const workerDb = createDb({ url: workerProxy.urlFor(process.env.DATABASE_URL!), poolSize: 3, connectTimeoutMs: 300 });
      const reconcilerDb = createDb({ url: reconcilerProxy.urlFor(process.env.DATABASE_URL!), poolSize: 2, connectTimeoutMs: 300 });
      const leaseMs = 1000;
      const recorder = createSendRecorder({ db: workerDb, log: silent, leaseMs });
      let reconciler: Reconciler | undefined;
      try {
        await device();
        const pushIds = await accept(2);
        await t.queues.webpush.obliterate({ force: true });
        await outOfTheWay(pushIds);
        const claim = await claimDeliveries(workerDb.pool, pushIds, 'webpush', leaseMs);
        recorder.hold(
          claim.leaseId,
          claim.deliveries.map((d) => d.id),
        );
        // Started once the pushes are under the worker's lease (before, they would be stranded).
        reconciler = startReconciler({
          db: reconcilerDb,
          queues: t.queues,
          provider: 'webpush',
          log: silent,
          intervalMs: 100,
          afterMs: 20,
          leaseMs,
          jobMaxMessages: 10,
          sendPolicy: { attempts: 4, backoffMs: 50 },
          quietAfterOutageMs,
        });
        await sleep(300); // passes that find the pushes under a live lease

        await Promise.all([workerProxy.stop(), reconcilerProxy.stop()]);
        const recorded = recorder.record(
          claim.deliveries.map((d) => ({ pushId: d.messageId, outcome: { deliveryId: d.id, status: 'sent' as const, providerMessageId: null } })),
        );
        await sleep(2.5 * leaseMs);
        await reconcilerProxy.resume();
        await sleep(500);
        await workerProxy.resume();
        await recorded;
        await recorder.finish(claim.leaseId);
        await sleep(1500); // the reconciler's passes after its quiet time
        const again = (await t.queues.webpush.getJobs(['wait', 'delayed', 'prioritized'])).filter((j) => j.id!.includes('-r')).flatMap((j) => j.data.pushIds as string[]);
        return { pushIds, again: pushIds.filter((id) => again.includes(id)), statuses: await statuses(pushIds) };
      } finally {
        await reconciler?.stop();
        await recorder.close();
        await Promise.all([closeDb(workerDb), closeDb(reconcilerDb)]);
        await Promise.all([workerProxy.stop(), reconcilerProxy.stop()]);
      }
    };

    it("a worker cut off a moment ago takes a lease that lapsed meanwhile for held; one that was not, takes it over", async () => {
      const phone = await device();
      const pushIds = await accept(2);
      await outOfTheWay(pushIds);
      // A worker took the pushes, then lost PostgreSQL: its lease lapses unrenewed.
      await claimDeliveries(t.db.pool, pushIds, 'webpush', 500);
      await sleep(700);
      const recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 500 });
      try {
        const deps = specSendDeps({ db: t.db, provider: 'webpush', providerFor: () => t.provider, recorder, leaseMs: 500 });
        // This worker's own last query failed for an unreachable database just now.
        const cutOff = createOutageClock();
        cutOff.saw(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
        expect(await processSendJob({ ...deps, outage: cutOff }, job(pushIds))).toMatchObject({ kind: 'wait', reason: 'pushes held by another job' });
        expect(t.fake.receivedFor(phone)).toHaveLength(0);
        // A worker that saw no outage (or saw it more than a lease ago) takes the lapsed lease over.
        expect(await processSendJob({ ...deps, outage: createOutageClock() }, job(pushIds))).toEqual({ kind: 'done', sent: 2, failed: 0, dropped: 0 });
        expect([...receipts(phone).values()]).toEqual([1, 1]);
      } finally {
        await recorder.close();
      }
    });

    it('the reconciler takes nothing for a lease after PostgreSQL is back, and the worker records its sends meanwhile', async () => {
      const { again, statuses } = await outage();
      expect(statuses).toEqual(['sent', 'sent']);
      expect(again).toEqual([]);
    });

    it('(the control) with no quiet time, the reconciler takes the sent pushes as lost and enqueues them again', async () => {
      const { pushIds, again } = await outage(0);
      expect(again.sort()).toEqual([...pushIds].sort());
    });
  });

  describe('a worker process killed with SIGKILL mid-job', () => {
    let workers: BundledWorker;

    beforeAll(() => {
      workers = new BundledWorker('push-worker-webpush');
    });
    afterEach(() => workers.killAll());

    const startWorker = () =>
      workers.start({
        QUEUE_PREFIX: t.prefix,
        VAPID_PUBLIC_KEY: t.vapid.publicKey,
        VAPID_PRIVATE_KEY: t.vapid.privateKey,
        VAPID_SUBJECT: t.vapid.subject,
        WEBPUSH_ALLOWED_ORIGINS: t.fake.origin,
        PUSH_WORKER_CONCURRENCY: '1',
        PUSH_WORKER_PARALLEL_MESSAGES: '4',
        PUSH_RECORD_INTERVAL_MS: String(RECORD_INTERVAL_MS),
      });
    const RECORD_INTERVAL_MS = 100;

    it('sends again at most the sends waiting for an answer at the kill and the last answers; the rest are recorded or taken over', async () => {
      // One job: recorded only at its end, every push sent before the kill would go out again.
      const COUNT = 240;
      const IN_FLIGHT = 1 * 4; // concurrency × parallel messages
      const phone = await device();
      t.fake.respond(phone, ...Array.from({ length: COUNT * 2 }, () => ({ status: 201, delayMs: 50 })));
      const pushIds = await accept(COUNT);
      await outOfTheWay(pushIds);

      const first = startWorker();
      // Half way: at most 80 answers a second come (4 at a time, 50 ms each), so the bound below,
      // the last 500 ms of answers and those on the wire, stays under half of what was sent.
      await until(() => t.fake.receivedFor(phone).length >= COUNT / 2, 'half of the pushes to be sent', 20000);
      first.kill('SIGKILL');
      const killedAt = Date.now();
      await new Promise((resolve) => first.once('exit', resolve));
      const sentBeforeKill = t.fake.receivedFor(phone).length;
      // Answers not written yet at the kill: those of the last interval, and of a write under way.
      const lastAnswers = t.fake.receivedFor(phone).filter((m) => m.at > killedAt - RECORD_INTERVAL_MS - 400).length;

      startWorker();
      await until(async () => (await statuses(pushIds)).every((s) => s === 'sent'), 'every push to be sent after the kill', 30000);

      const counts = receipts(phone);
      expect(counts.size).toBe(COUNT);
      const twice = [...counts.values()].filter((n) => n > 1);
      expect(twice.every((n) => n === 2)).toBe(true);
      expect(twice.length).toBeLessThanOrEqual(IN_FLIGHT + lastAnswers);
      expect(sentBeforeKill).toBeGreaterThan(2 * (IN_FLIGHT + lastAnswers));
    }, 60000);
  });
  it('settles a push whose deliveries two writers record as failed at the same time', async () => {
    await device();
    await device();
    const [pushId] = await accept(1);
    const claim = await claimDeliveries(t.db.pool, [pushId], 'webpush', 60000);
    expect(claim.deliveries).toHaveLength(2);
    const [first, second] = claim.deliveries.map((delivery) => delivery.id);
    const failed = (deliveryId: string) => ({ deliveryId, status: 'failed' as const, errorCode: 'payload', error: 'refused' });
    const a = await t.db.pool.connect();
    const b = await t.db.pool.connect();
    try {
      await a.query('BEGIN');
      await b.query('BEGIN');
      // Each writer records its own delivery; neither has committed when the other tallies.
      await recordOutcomes(a, [failed(first)], [pushId]);
      await recordOutcomes(b, [failed(second)], [pushId]);
      expect(await lockMessages(a, [pushId])).toEqual([pushId]);
      expect(await settleMessages(a, [pushId])).toEqual([]);
      const bSettles = lockMessages(b, [pushId]).then((ids) => settleMessages(b, ids));
      await sleep(200);
      await a.query('COMMIT');
      expect(await bSettles).toEqual([{ id: pushId, status: 'failed', error: 'payload' }]);
      await b.query('COMMIT');
    } finally {
      a.release();
      b.release();
    }
    const events = await t.db.pool.query(`SELECT status FROM events WHERE push_id = $1`, [pushId]);
    expect(events.rows).toEqual([{ status: 'failed' }]);
  });
});
