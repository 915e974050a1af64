import pg from 'pg';
import { claimDeliveries, closeDb, createDb, readDeliveries, type Db } from '@operator/db';
import { pushRequest, startPgBouncer, uniqueName, until } from '@operator/testing';
import { acceptMessages } from './accept';
import { UnavailableError } from './errors';
import { createSendRecorder } from './outcomes';
import { silent, WebPushFixture } from './test/web-push-fixture';

// Needs PostgreSQL, Redis and pgbouncer. What a PostgreSQL failover does to the push path: the
// seconds a connection lands on a node that is still read-only (25006), a recording that fails
// for good, and the pool behind PgBouncer in transaction mode.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the push path through a PostgreSQL failover', () => {
  const t = new WebPushFixture('test-failover');
  let admin: pg.Client;

  beforeAll(async () => {
    await t.open();
    admin = new pg.Client({ connectionString: process.env.DATABASE_URL! });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.end();
    await t.close();
  });
  beforeEach(() => t.begin());
  afterEach(() => t.end());

  /** The push's only delivery as it stands (no try recorded: pending, 0 attempts). */
  const delivery = async (pushId: string) => (await readDeliveries(t.db.pool, [pushId]))[0];

  /** A pushed message, sent to one device, claimed by this worker as processSendJob claims it. */
  async function claimedDelivery(leaseMs: number) {
    await t.device();
    const [pushId] = await t.accept(1);
    const claim = await claimDeliveries(t.db.pool, [pushId], 'webpush', leaseMs);
    expect(claim.deliveries).toHaveLength(1);
    return { pushId, deliveryId: claim.deliveries[0].id, leaseId: claim.leaseId! };
  }

  const leaseUntil = async (leaseId: string) =>
    (await t.db.pool.query<{ leaseUntil: Date }>(`SELECT lease_until AS "leaseUntil" FROM send_leases WHERE id = $1`, [leaseId])).rows[0]?.leaseUntil;

  /**
   * A login of its own whose sessions are read-only, as every session on a standby (or a demoted
   * primary) is: writes fail with 25006. `writable()` ends that, as a promotion does: its sessions
   * are ended (57P01) and the next ones can write.
   */
  async function readOnlyLogin() {
    const role = uniqueName('ro').replace(/[^a-z0-9_]/gi, '_').toLowerCase();
    await admin.query(`CREATE ROLE ${role} LOGIN SUPERUSER`);
    await admin.query(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
    const url = new URL(process.env.DATABASE_URL!);
    url.username = role;
    const db = createDb({ url: url.toString(), poolSize: 2 });
    return {
      db,
      async writable() {
        await admin.query(`ALTER ROLE ${role} RESET default_transaction_read_only`);
        await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [role]);
      },
      async drop() {
        await closeDb(db);
        await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [role]);
        await admin.query(`DROP ROLE ${role}`);
      },
    };
  }

  it('answers a batch that meets a read-only PostgreSQL as unavailable as a whole (503), not fatal message by message', async () => {
    await t.device();
    const readOnly = await readOnlyLogin();
    try {
      const deps = { db: readOnly.db, redis: t.producer, queues: t.queues, jobMaxMessages: 100, sendPolicy: { attempts: 4, backoffMs: 50 } };
      const requests = Array.from({ length: 64 }, () => pushRequest(t.brand, t.player));
      await expect(acceptMessages(deps, requests, {})).rejects.toBeInstanceOf(UnavailableError);
    } finally {
      await readOnly.drop();
    }
  });

  it('holds an outcome that meets a read-only PostgreSQL past the failures that give a write up, and records it once the node takes writes', async () => {
    const { pushId, deliveryId, leaseId } = await claimedDelivery(60000);
    const readOnly = await readOnlyLogin();
    const recorder = createSendRecorder({ db: readOnly.db, log: silent, leaseMs: 600 });
    try {
      recorder.hold(leaseId, [deliveryId]);
      let settled: string | undefined;
      const recorded = recorder.record([{ pushId, outcome: { deliveryId, status: 'sent', providerMessageId: 'provider-1' } }]).then(
        () => (settled = 'recorded'),
        (error: Error) => (settled = `given up: ${error.message}`),
      );
      // Five write failures of another kind would have given it up by now (write-behind's maxFailures).
      await sleep(3000);
      expect(settled).toBeUndefined();
      expect(recorder.held).toBe(1);
      expect(await delivery(pushId)).toMatchObject({ status: 'pending', attempts: 0 }); // no outcome written yet

      await readOnly.writable();
      await recorded;
      expect(settled).toBe('recorded');
      expect(await delivery(pushId)).toMatchObject({ status: 'sent', providerMessageId: 'provider-1', attempts: 1 });
      expect(recorder.held).toBe(0);
    } finally {
      await recorder.close();
      await readOnly.drop();
    }
  }, 30000);

  it("renews a job's lease while it runs, and drops it when the job ends, an outcome given up included", async () => {
    const { pushId, deliveryId, leaseId } = await claimedDelivery(600);
    const recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 600 });
    try {
      recorder.hold(leaseId, [deliveryId]);
      const taken = (await leaseUntil(leaseId))!;
      // Past the lease's first 600 ms: renewed (every 200 ms), so still held.
      await sleep(800);
      expect((await leaseUntil(leaseId))!.getTime()).toBeGreaterThan(taken.getTime());
      expect(await claimDeliveries(t.db.pool, [pushId], 'webpush', 600)).toMatchObject({ deliveries: [], heldElsewhere: 1 });

      // A push id that is not a uuid: the write fails the same way every time, and is given up.
      const recording = recorder.record([{ pushId: 'not-a-push-id', outcome: { deliveryId, status: 'sent', providerMessageId: null } }]);
      await expect(recording).rejects.toMatchObject({ code: '22P02' });
      expect(recorder.held).toBe(0);
      await recorder.finish(leaseId);
      expect(await leaseUntil(leaseId)).toBeUndefined();

      // The push is free at once: the next job takes its delivery, never recorded.
      expect(await delivery(pushId)).toMatchObject({ status: 'pending', attempts: 0 });
      expect((await claimDeliveries(t.db.pool, [pushId], 'webpush', 600)).deliveries.map((d) => d.id)).toEqual([deliveryId]);
    } finally {
      await recorder.close();
    }
  }, 30000);

  it('accepts a batch, claims and records its sends through PgBouncer in transaction mode with its defaults', async () => {
    const bouncer = await startPgBouncer(process.env.DATABASE_URL!);
    const pooled: Db = createDb({ url: bouncer.url, poolSize: 3 });
    const recorder = createSendRecorder({ db: pooled, log: silent, leaseMs: 60000 });
    try {
      await t.device();
      const deps = { db: pooled, redis: t.producer, queues: t.queues, jobMaxMessages: 100, sendPolicy: { attempts: 4, backoffMs: 50 } };
      const outcomes = await acceptMessages(deps, [pushRequest(t.brand, t.player), pushRequest(t.brand, t.player)], {});
      expect(outcomes.map((outcome) => outcome.kind)).toEqual(['accepted', 'accepted']);
      const pushIds = outcomes.map((outcome) => (outcome.kind === 'accepted' ? outcome.pushId : ''));

      const claim = await claimDeliveries(pooled.pool, pushIds, 'webpush', 60000);
      recorder.hold(
        claim.leaseId,
        claim.deliveries.map((d) => d.id),
      );
      await recorder.record(claim.deliveries.map((d) => ({ pushId: d.messageId, outcome: { deliveryId: d.id, status: 'sent' as const, providerMessageId: `p-${d.id}` } })));
      await recorder.finish(claim.leaseId);
      await until(async () => (await Promise.all(pushIds.map(delivery))).every((row) => row.status === 'sent'), 'the outcomes in PostgreSQL');
      expect(await leaseUntil(claim.leaseId!)).toBeUndefined();
      const messages = await t.db.pool.query<{ status: string }>('SELECT status::text FROM messages WHERE id = ANY($1::uuid[])', [pushIds]);
      expect(messages.rows.map((row) => row.status)).toEqual(['sent', 'sent']);
    } finally {
      await recorder.close();
      await closeDb(pooled);
      await bouncer.stop();
    }
  });
});
