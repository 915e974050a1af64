import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { fcmToken, uniqueBrandId, uniqueId, uniqueName } from '@operator/testing';
import { closeDb, createDb, type Db } from './client';
import { claimDeliveries, dropLapsedLeases, dropLeases, readDeliveries, recordOutcomes, renewLeases, settleMessages, takeStrandedPushes } from './deliveries';
import { readPushStatus } from './feed';
import { deleteDevice, registerDevice } from './devices';
import { storeMessages } from './messages';
import { partitionName, uuidV7Day } from './partitions';
import { nodes, plans, type PlanNode } from './test/plans';

// A push's deliveries against PostgreSQL: a job takes a lease on its pushes (no other job sends
// them while it lasts; the deliveries are not written), records what became of each (a late `sent`
// wins over a failure), and the message settles from them.

describe('deliveries (PostgreSQL)', () => {
  let db: Db;
  let brand: number;
  let player: string;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
  });
  afterAll(() => closeDb(db));
  beforeEach(() => {
    brand = uniqueBrandId();
    player = uniqueName('player');
  });

  const device = (provider: 'fcm' | 'apns' | 'hms') =>
    registerDevice(db, randomUUID(), {
      brandId: BigInt(brand),
      userId: player,
      provider,
      platform: provider === 'apns' ? 'ios' : 'android',
      token: fcmToken(),
      p256dh: null,
      auth: null,
    });

  /** A push accepted for the player's devices: its id (a UUIDv4 by default: the default partition). */
  async function push(id: string = randomUUID()): Promise<string> {
    const [stored] = await storeMessages(db.pool, [
      {
        id,
        brandId: BigInt(brand),
        crmMessageId: BigInt(uniqueId()),
        userId: player,
        activityId: 1n,
        actionGroupId: 2n,
        actionId: 3n,
        triggerHash: uniqueName('trigger'),
        origin: null,
        payload: { title: 'hello' },
        meta: null,
        crmHeaders: {},
      },
    ]);
    expect(stored.insertedId).toBe(id);
    return id;
  }

  async function delivery(id: string) {
    const { rows } = await db.pool.query(
      `SELECT status::text, attempts, provider_message_id AS "providerMessageId", error_code AS "errorCode", error,
              sent_at IS NOT NULL AS "sentAt"
         FROM deliveries WHERE id = $1`,
      [id],
    );
    return rows[0];
  }

  /** The deliveries a push names, in its order. */
  async function named(pushId: string): Promise<{ id: string; deviceId: string; provider: string }[]> {
    const { rows } = await db.pool.query(
      `SELECT u.id, u.device_id AS "deviceId", u.provider::text AS provider
         FROM messages m CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) WITH ORDINALITY AS u(id, device_id, provider, n)
        WHERE m.id = $1 ORDER BY u.n`,
      [pushId],
    );
    return rows;
  }

  /**
   * What `count` (a sum over pg_stat_xact_user_tables) grows by while `work` runs, in a transaction
   * of its own on `client`: counted by this session's own statistics, so no other session's
   * late-flushed counts get in. Those statistics also hold this session's earlier transactions until
   * it flushes them (at most once a second, between transactions), hence the count before.
   */
  const countedIn = async (client: pg.PoolClient, count: string, work: () => Promise<unknown>) => {
    const counted = async () => Number((await client.query<{ n: string | null }>(`SELECT (${count})::text AS n FROM pg_stat_xact_user_tables`)).rows[0].n ?? 0);
    await client.query('BEGIN');
    try {
      const before = await counted();
      await work();
      const after = await counted();
      await client.query('COMMIT');
      return after - before;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    }
  };

  /** Rows that `work` reads from the messages and deliveries of the day (the default partition here: the pushes' ids are not UUIDv7). */
  const rowsRead = (client: pg.PoolClient, work: () => Promise<unknown>) =>
    countedIn(client, `sum(COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)) FILTER (WHERE relname IN ('messages_default', 'deliveries_default'))`, work);

  /** The rows a plan's joins compared and dropped: a nested loop that filters each row against every other compares them all. */
  const compared = (plan: PlanNode) => nodes(plan).reduce((sum, node) => sum + (node['Rows Removed by Join Filter'] ?? 0) * (node['Actual Loops'] ?? 1), 0);

  const rowsOf = async (pushId: string) => Number((await db.pool.query(`SELECT count(*) FROM deliveries WHERE message_id = $1`, [pushId])).rows[0].count);

  it('accepts a push naming one delivery per device, and writes no delivery row', async () => {
    const fcm = await device('fcm');
    const apns = await device('apns');
    const pushId = await push();
    const deliveries = await named(pushId);
    expect(deliveries.map(({ deviceId, provider }) => ({ deviceId, provider })).sort((a, b) => a.provider.localeCompare(b.provider))).toEqual([
      { deviceId: apns.device.id, provider: 'apns' },
      { deviceId: fcm.device.id, provider: 'fcm' },
    ]);
    expect(new Set(deliveries.map((d) => d.id)).size).toBe(2);
    expect(await rowsOf(pushId)).toBe(0);
  });

  it("claims the provider's deliveries with their device and message, once, without writing them", async () => {
    const fcm = await device('fcm');
    await device('apns');
    const pushId = await push();
    const id = (await named(pushId)).find((d) => d.provider === 'fcm')!.id;

    const claim = await claimDeliveries(db.pool, [pushId, pushId], 'fcm', 60_000);

    expect(claim.deliveries).toEqual([
      {
        id,
        messageId: pushId,
        deviceId: fcm.device.id,
        token: fcm.device.token,
        platform: 'android',
        p256dh: null,
        auth: null,
        deviceActive: true,
        attempts: 1,
      },
    ]);
    expect(claim.messages).toEqual(new Map([[pushId, { id: pushId, brandId: String(brand), payload: { title: 'hello' } }]]));
    expect(claim).toMatchObject({ leaseId: expect.any(String), heldElsewhere: 0, missing: [] });
    expect(await rowsOf(pushId)).toBe(0);
    const { rows: leases } = await db.pool.query(`SELECT provider::text, push_ids::text[] AS "pushIds" FROM send_leases WHERE id = $1`, [claim.leaseId]);
    expect(leases).toEqual([{ provider: 'fcm', pushIds: [pushId] }]);

    // Held for this provider only: another job of it waits, the APNs job takes its own.
    const again = await claimDeliveries(db.pool, [pushId], 'fcm', 60_000);
    expect(again).toMatchObject({ leaseId: null, deliveries: [], heldElsewhere: 1, missing: [] });
    expect(again.messages.size).toBe(0);
    expect((await claimDeliveries(db.pool, [pushId], 'apns', 60_000)).deliveries).toHaveLength(1);
  });

  it('leases the pushes no other job holds, and takes again a lease older than its time, or dropped', async () => {
    await device('fcm');
    const held = await push();
    const free = await push();
    const first = await claimDeliveries(db.pool, [held], 'fcm', 60_000);

    const second = await claimDeliveries(db.pool, [held, free], 'fcm', 60_000);
    expect(second.deliveries.map((d) => d.messageId)).toEqual([free]);
    expect(second.heldElsewhere).toBe(1);

    await db.pool.query(`UPDATE send_leases SET lease_until = now() - interval '1 second' WHERE id = $1`, [first.leaseId]);
    const lapsed = await claimDeliveries(db.pool, [held], 'fcm', 60_000);
    expect(lapsed.deliveries.map((d) => d.messageId)).toEqual([held]);

    expect(await dropLeases(db.pool, [lapsed.leaseId!, second.leaseId!])).toBe(2);
    const afterDrop = await claimDeliveries(db.pool, [held, free], 'fcm', 60_000);
    expect(afterDrop.deliveries.map((d) => d.messageId).sort()).toEqual([held, free].sort());

    // A renewed lease holds on; a lapsed one is deleted by the reconciler's pass once a lease's time more has gone.
    await renewLeases(db.pool, [afterDrop.leaseId!], 60_000);
    expect((await claimDeliveries(db.pool, [held], 'fcm', 60_000)).heldElsewhere).toBe(1);
    await db.pool.query(`UPDATE send_leases SET lease_until = now() - interval '2 minutes' WHERE id = ANY($1::uuid[])`, [[first.leaseId, afterDrop.leaseId]]);
    expect(await dropLapsedLeases(db.pool, 60_000)).toBeGreaterThanOrEqual(2);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM send_leases WHERE id = ANY($1::uuid[])`, [[first.leaseId, afterDrop.leaseId]])).rows[0].n).toBe(0);
  });

  it('looks at the send leases through their index, however many dead leases the table holds', async () => {
    // Dead leases of 100 pushes each, as jobs leave them between two vacuums: the planner, left to
    // itself, read them all. Made 1,000 at a time: one statement of 12,000 (1.2 million GIN
    // entries) ran past the statement timeout on a busy machine.
    const dead: string[] = [];
    for (let chunk = 0; chunk < 12; chunk++) {
      const { rows } = await db.pool.query<{ id: string }>(
        `INSERT INTO send_leases (id, provider, push_ids, lease_until)
         SELECT gen_random_uuid(), 'fcm', ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 100) WHERE n > 0), now() FROM generate_series(1, 1000) AS n
         RETURNING id`,
      );
      dead.push(...rows.map((row) => row.id));
    }
    await dropLeases(db.pool, dead);
    await device('fcm');
    // A job's worth of pushes: the planner weighs one index probe per push against reading the table.
    const pushIds = await Promise.all(Array.from({ length: 100 }, () => push()));
    const client = await db.pool.connect();
    try {
      let leaseId: string | null = null;
      const seqScans = await countedIn(client, `sum(seq_scan) FILTER (WHERE relname = 'send_leases')`, async () => {
        const claim = await claimDeliveries(client, pushIds, 'fcm', 60_000);
        expect(claim.deliveries).toHaveLength(100);
        leaseId = claim.leaseId;
        expect(await claimDeliveries(client, pushIds, 'fcm', 60_000)).toMatchObject({ leaseId: null, heldElsewhere: 100 });
        expect((await readPushStatus(client, pushIds)).every((p) => p.deliveries[0].status === 'sending')).toBe(true);
      });
      expect(seqScans).toBe(0);
      await dropLeases(client, [leaseId!]);
    } finally {
      client.release();
    }
  });

  it('never gives one push to two jobs that take their leases at the same moment, and leaves nothing held once they end', async () => {
    await device('fcm');
    const pushIds = await Promise.all(Array.from({ length: 20 }, () => push()));
    for (let round = 0; round < 5; round++) {
      const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => claimDeliveries(db.pool, [...pushIds.slice(i), ...pushIds.slice(0, i)], 'fcm', 60_000)));
      const taken = claims.flatMap((claim) => claim.deliveries.map((d) => d.messageId));
      // No push in two jobs; a push all of them gave up (each saw another's lease) waits for a later run.
      expect(new Set(taken).size).toBe(taken.length);
      await dropLeases(db.pool, claims.flatMap((claim) => (claim.leaseId ? [claim.leaseId] : [])));
      const after = await claimDeliveries(db.pool, pushIds, 'fcm', 60_000);
      expect(after.deliveries.map((d) => d.messageId).sort()).toEqual([...pushIds].sort());
      await dropLeases(db.pool, [after.leaseId!]);
    }
  });

  it('answers the pushes it cannot find, and a delivery whose device was removed without a token', async () => {
    const fcm = await device('fcm');
    const pushId = await push();
    expect(await deleteDevice(db, fcm.device.id)).toBe(true);
    const unknown = randomUUID();

    const claim = await claimDeliveries(db.pool, [pushId, unknown], 'fcm', 60_000);

    expect(claim.missing).toEqual([unknown]);
    expect(claim.deliveries).toEqual([expect.objectContaining({ messageId: pushId, deviceId: fcm.device.id, token: null, platform: null, deviceActive: false })]);
  });

  it('records outcomes only on deliveries not final yet, except that a late sent wins over a failure', async () => {
    await device('fcm');
    await device('apns');
    const pushId = await push();
    const [fcm] = (await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries;
    const [apns] = (await claimDeliveries(db.pool, [pushId], 'apns', 60_000)).deliveries;

    await recordOutcomes(
      db.pool,
      [
        { deliveryId: fcm.id, status: 'failed', errorCode: 'unavailable', error: 'x'.repeat(2000) },
        { deliveryId: apns.id, status: 'pending', errorCode: 'rate-limited', error: 'retry later' },
      ],
      [pushId, pushId],
    );
    expect(await delivery(fcm.id)).toEqual({ status: 'failed', attempts: 1, providerMessageId: null, errorCode: 'unavailable', error: 'x'.repeat(1000), sentAt: false });
    expect(await delivery(apns.id)).toMatchObject({ status: 'pending', attempts: 1, errorCode: 'rate-limited', error: 'retry later' });

    // A delivery left pending for a retry takes the outcome of any later try; neither a failure nor
    // a retry replaces a final outcome; a sent does.
    await recordOutcomes(db.pool, [{ deliveryId: apns.id, status: 'failed', errorCode: 'unregistered', error: 'gone' }], [pushId]);
    expect(await delivery(apns.id)).toMatchObject({ status: 'failed', errorCode: 'unregistered', attempts: 2 });
    await recordOutcomes(db.pool, [{ deliveryId: apns.id, status: 'pending', errorCode: 'late', error: 'late' }], [pushId]);
    expect(await delivery(apns.id)).toMatchObject({ status: 'failed', errorCode: 'unregistered', attempts: 2 });
    await recordOutcomes(db.pool, [{ deliveryId: fcm.id, status: 'sent', providerMessageId: 'projects/p/messages/1' }], [pushId]);
    expect(await delivery(fcm.id)).toEqual({ status: 'sent', attempts: 2, providerMessageId: 'projects/p/messages/1', errorCode: null, error: null, sentAt: true });
    await recordOutcomes(db.pool, [{ deliveryId: fcm.id, status: 'failed', errorCode: 'late', error: 'late' }], [pushId]);
    expect(await delivery(fcm.id)).toMatchObject({ status: 'sent', errorCode: null });
    expect(await rowsOf(pushId)).toBe(2);
  });

  describe('a push of one device: its outcome on the push, no delivery row', () => {
    const pushState = async (pushId: string) =>
      (
        await db.pool.query(
          `SELECT status::text, error, open, attempts, provider_message_id AS "providerMessageId", error_code AS "errorCode", error_detail AS "errorDetail",
                  sent_at IS NOT NULL AS "sentAt" FROM messages WHERE id = $1`,
          [pushId],
        )
      ).rows[0];
    const events = async (pushId: string) =>
      (await db.pool.query(`SELECT status, error FROM events WHERE push_id = $1 ORDER BY seq`, [pushId])).rows;

    it('counts a try left pending on the push, claims it again with its attempts, and settles it in one update with its event', async () => {
      await device('fcm');
      const pushId = await push();
      const first = await claimDeliveries(db.pool, [pushId], 'fcm', 60_000);
      expect(first.deliveries).toMatchObject([{ attempts: 1 }]);
      const [{ id }] = first.deliveries;

      expect(await recordOutcomes(db.pool, [{ deliveryId: id, status: 'pending', errorCode: 'unavailable', error: 'x'.repeat(2000) }], [pushId])).toEqual([]);
      expect(await pushState(pushId)).toEqual({
        status: 'accepted',
        error: null,
        open: true,
        attempts: 1,
        providerMessageId: null,
        errorCode: 'unavailable',
        errorDetail: 'x'.repeat(1000),
        sentAt: false,
      });
      // Left pending: the reconciler finds it through the index of open pushes once no lease holds it.
      await dropLeases(db.pool, [first.leaseId!]);
      expect(await takeStrandedPushes(db.pool, 'fcm', 0, 100_000)).toContain(pushId);
      const second = await claimDeliveries(db.pool, [pushId], 'fcm', 60_000);
      expect(second.deliveries).toMatchObject([{ id, attempts: 2 }]);
      expect(await readPushStatus(db.pool, [pushId])).toMatchObject([{ status: 'accepted', deliveries: [{ provider: 'fcm', status: 'sending', error: 'unavailable' }] }]);

      expect(await recordOutcomes(db.pool, [{ deliveryId: id, status: 'sent', providerMessageId: 'projects/p/messages/1' }], [pushId])).toEqual([
        { id: pushId, status: 'sent', error: null },
      ]);
      expect(await pushState(pushId)).toEqual({
        status: 'sent',
        error: null,
        open: null,
        attempts: 2,
        providerMessageId: 'projects/p/messages/1',
        errorCode: null,
        errorDetail: null,
        sentAt: true,
      });
      expect(await events(pushId)).toEqual([{ status: 'sent', error: null }]);
      expect(await rowsOf(pushId)).toBe(0);
      expect(await readDeliveries(db.pool, [pushId])).toMatchObject([{ id, provider: 'fcm', status: 'sent', attempts: 2, providerMessageId: 'projects/p/messages/1' }]);
      await dropLeases(db.pool, [second.leaseId!]);
      expect(await readPushStatus(db.pool, [pushId])).toMatchObject([{ status: 'sent', deliveries: [{ provider: 'fcm', status: 'sent', error: null }] }]);

      // Final: not claimed again, out of the reconciler's reach, and a later outcome changes nothing.
      expect((await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries).toEqual([]);
      expect(await takeStrandedPushes(db.pool, 'fcm', 0, 100_000)).not.toContain(pushId);
      expect(await recordOutcomes(db.pool, [{ deliveryId: id, status: 'failed', errorCode: 'late', error: 'late' }], [pushId])).toEqual([]);
      expect(await pushState(pushId)).toMatchObject({ status: 'sent', attempts: 2, errorCode: null });
      expect(await events(pushId)).toHaveLength(1);
    });

    it('fails the push with the error code as its error, and keeps the status a device reported before the send was recorded', async () => {
      await device('fcm');
      const failedPush = await push();
      const reportedPush = await push();
      const claim = await claimDeliveries(db.pool, [failedPush, reportedPush], 'fcm', 60_000);
      const idOf = (pushId: string) => claim.deliveries.find((d) => d.messageId === pushId)!.id;
      // A device reported its push delivered before the worker recorded the send, as a gateway
      // could before reports needed a recorded send: the push moved on, with its events.
      await db.pool.query(`UPDATE messages SET status = 'delivered' WHERE id = $1`, [reportedPush]);
      for (const status of ['sent', 'delivered']) {
        await db.pool.query(`INSERT INTO events (id, topic, ordering_key, push_id, status) VALUES (uuid_v7(), 'push.status', $1::text, $1::uuid, $2)`, [reportedPush, status]);
      }

      const settled = await recordOutcomes(
        db.pool,
        [
          { deliveryId: idOf(failedPush), status: 'failed', errorCode: 'unregistered', error: 'gone' },
          { deliveryId: idOf(reportedPush), status: 'sent', providerMessageId: 'm-2' },
        ],
        [failedPush, reportedPush],
      );
      expect(settled).toEqual([{ id: failedPush, status: 'failed', error: 'unregistered' }]);
      expect(await pushState(failedPush)).toMatchObject({ status: 'failed', error: 'unregistered', open: null, attempts: 1, errorCode: 'unregistered', sentAt: false });
      expect(await events(failedPush)).toEqual([{ status: 'failed', error: 'unregistered' }]);
      // Closed with its outcome, its status and events as the report left them.
      expect(await pushState(reportedPush)).toMatchObject({ status: 'delivered', open: null, attempts: 1, providerMessageId: 'm-2', sentAt: true });
      expect((await events(reportedPush)).map((e) => e.status)).toEqual(['sent', 'delivered']);
      expect(await readDeliveries(db.pool, [failedPush, reportedPush])).toEqual(
        expect.arrayContaining([expect.objectContaining({ messageId: failedPush, status: 'failed', errorCode: 'unregistered', error: 'gone' }), expect.objectContaining({ messageId: reportedPush, status: 'sent' })]),
      );
      await dropLeases(db.pool, [claim.leaseId!]);
      expect((await claimDeliveries(db.pool, [failedPush, reportedPush], 'fcm', 60_000)).deliveries).toEqual([]);
    });

    it('gives each push of one device its own outcome, whatever the case of the ids it is named by', async () => {
      await device('fcm');
      // Ids that start a, b, c, ... f: named with b, d and f in upper case, they sort B D F a c e as text.
      const pushIds: string[] = [];
      for (let i = 0; i < 12; i++) pushIds.push(await push('abcdef'[i % 6] + randomUUID().slice(1)));
      const claim = await claimDeliveries(db.pool, pushIds, 'fcm', 60_000);
      const named = pushIds.map((id, i) => (i % 2 ? id.toUpperCase() : id)).reverse();
      const sent = (i: number) => i % 3 === 0;
      await recordOutcomes(
        db.pool,
        named.map((id) => {
          const i = pushIds.indexOf(id.toLowerCase());
          const deliveryId = claim.deliveries.find((d) => d.messageId === pushIds[i])!.id;
          return sent(i) ? { deliveryId, status: 'sent', providerMessageId: `m-${i}` } : { deliveryId, status: 'failed', errorCode: `code-${i}`, error: 'no' };
        }),
        named,
      );
      for (const [i, pushId] of pushIds.entries()) {
        expect(await pushState(pushId)).toMatchObject(
          sent(i) ? { status: 'sent', providerMessageId: `m-${i}`, sentAt: true } : { status: 'failed', error: `code-${i}`, errorCode: `code-${i}`, sentAt: false },
        );
      }
      await dropLeases(db.pool, [claim.leaseId!]);
    });

    it('claims a job of one-device pushes reading each push once, and no delivery row', async () => {
      await device('fcm');
      const job = await Promise.all(Array.from({ length: 100 }, () => push()));
      const client = await db.pool.connect();
      try {
        const probes = await countedIn(
          client,
          `sum(COALESCE(idx_scan, 0) + COALESCE(seq_scan, 0)) FILTER (WHERE relname IN ('messages_default', 'deliveries_default'))`,
          async () => expect((await claimDeliveries(client, job, 'fcm', 60_000)).deliveries).toHaveLength(100),
        );
        expect(probes).toBeGreaterThan(0);
        expect(probes).toBeLessThanOrEqual(100);
      } finally {
        client.release();
      }
    });

    it("records a job's status events under ids the caller made, at consecutive positions of the feed before its transaction's next event", async () => {
      await device('fcm');
      const pushIds = await Promise.all(Array.from({ length: 5 }, () => push()));
      const claim = await claimDeliveries(db.pool, pushIds, 'fcm', 60_000);
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        const settled = await recordOutcomes(
          client,
          claim.deliveries.map((d, i) => (i % 2 ? { deliveryId: d.id, status: 'failed', errorCode: 'unregistered', error: 'gone' } : { deliveryId: d.id, status: 'sent', providerMessageId: null })),
          claim.deliveries.map((d) => d.messageId),
        );
        expect(settled).toHaveLength(5);
        // An event of the same transaction written with the column's default position.
        await client.query(`INSERT INTO events (id, topic, ordering_key, status) VALUES (gen_random_uuid(), 'test.after', $1, 'sent')`, [pushIds[0]]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      await dropLeases(db.pool, [claim.leaseId!]);
      const { rows } = await db.pool.query<{ id: string; pushId: string | null; position: string }>(
        `SELECT id, push_id AS "pushId", feed_seq::text AS position FROM events WHERE push_id = ANY($1::uuid[]) OR (topic = 'test.after' AND ordering_key = $2) ORDER BY feed_seq`,
        [pushIds, pushIds[0]],
      );
      expect(rows).toHaveLength(6);
      // In the order of their pushes' ids, one position apart, the default's next position right after.
      expect(rows.slice(0, 5).map((row) => row.pushId)).toEqual([...pushIds].sort());
      const positions = rows.map((row) => BigInt(row.position));
      expect(positions.slice(1).map((position, i) => position - positions[i])).toEqual([1n, 1n, 1n, 1n, 1n]);
      // Version 7 ids, each its own.
      expect(rows.slice(0, 5).every((row) => row.id[14] === '7')).toBe(true);
      expect(new Set(rows.map((row) => row.id)).size).toBe(6);
    });

    it('records two tries of one push (two workers, one lease lapsed) once: the second waits for the first, then finds the push closed', async () => {
      await device('fcm');
      const pushId = await push();
      const [{ id }] = await named(pushId);
      const a = await db.pool.connect();
      const b = await db.pool.connect();
      try {
        await a.query('BEGIN');
        await b.query('BEGIN');
        expect(await recordOutcomes(a, [{ deliveryId: id, status: 'sent', providerMessageId: 'm-a' }], [pushId])).toHaveLength(1);
        const second = recordOutcomes(b, [{ deliveryId: id, status: 'sent', providerMessageId: 'm-b' }], [pushId]);
        await new Promise((resolve) => setTimeout(resolve, 100));
        await a.query('COMMIT');
        expect(await second).toEqual([]);
        await b.query('COMMIT');
      } finally {
        a.release();
        b.release();
      }
      expect(await pushState(pushId)).toMatchObject({ status: 'sent', attempts: 1, providerMessageId: 'm-a' });
      expect(await events(pushId)).toEqual([{ status: 'sent', error: null }]);
    });

    it('records a job of one-device pushes through their keys, without reading the rest of their day', async () => {
      await device('fcm');
      const pushes = [];
      for (let i = 0; i < 4; i++) pushes.push(...(await Promise.all(Array.from({ length: 500 }, () => push()))));
      const job = pushes.slice(0, 100);
      const claim = await claimDeliveries(db.pool, job, 'fcm', 60_000);
      expect(claim.deliveries).toHaveLength(100);
      const client = await db.pool.connect();
      try {
        const read = await rowsRead(client, async () => {
          const settled = await recordOutcomes(
            client,
            claim.deliveries.map((d) => ({ deliveryId: d.id, status: 'sent' as const, providerMessageId: null })),
            claim.deliveries.map((d) => d.messageId),
          );
          expect(settled).toHaveLength(100);
        });
        expect(read).toBeGreaterThan(0);
        expect(read).toBeLessThan(1000);
      } finally {
        client.release();
      }
    });

    it('records a job of one-device pushes without comparing each push with every outcome, whatever join the planner takes', async () => {
      await device('fcm');
      const job = await Promise.all(Array.from({ length: 400 }, () => push()));
      const claim = await claimDeliveries(db.pool, job, 'fcm', 60_000);
      expect(claim.deliveries).toHaveLength(400);
      const [plan] = await plans(db, async (sql, explaining) => {
        // A nested loop, as the planner takes when its statistics say the open pushes are a handful
        // (a day's, most of it settled, or none yet): in the bench's end to end it compared each
        // push of a job of 376 with every outcome (141,000 pairs, 120 ms a statement).
        await sql.query('SET LOCAL enable_hashjoin = off');
        await sql.query('SET LOCAL enable_mergejoin = off');
        return recordOutcomes(
          explaining,
          claim.deliveries.map((d) => ({ deliveryId: d.id, status: 'sent' as const, providerMessageId: null })),
          claim.deliveries.map((d) => d.messageId),
        );
      });
      // Each push settled, in one statement...
      const settled = nodes(plan).find((node) => node['Node Type'] === 'ModifyTable' && node['Relation Name'] === 'messages');
      expect(settled?.['Actual Rows']).toBe(400);
      // ...that found each push's outcome without going through the others.
      expect(compared(plan)).toBeLessThan(400);
    });

    it('records and settles a job of two-device pushes without comparing each with every outcome, whatever join the planner takes', async () => {
      await device('fcm');
      await device('fcm');
      const job = await Promise.all(Array.from({ length: 200 }, () => push()));
      const claim = await claimDeliveries(db.pool, job, 'fcm', 60_000);
      expect(claim.deliveries).toHaveLength(400);
      const outcomes = claim.deliveries.map((d) => ({ deliveryId: d.id, status: 'sent' as const, providerMessageId: null }));
      const pushIds = claim.deliveries.map((d) => d.messageId);
      let sent = 0;
      const [recorded, settled] = await plans(db, async (sql, explaining) => {
        await sql.query('SET LOCAL enable_hashjoin = off');
        await sql.query('SET LOCAL enable_mergejoin = off');
        await recordOutcomes(explaining, outcomes, pushIds);
        const { rows } = await sql.query<{ n: string }>(`SELECT count(*)::text AS n FROM deliveries WHERE id = ANY($1::uuid[]) AND status = 'sent'`, [
          outcomes.map((outcome) => outcome.deliveryId),
        ]);
        sent = Number(rows[0].n);
        return settleMessages(explaining, job);
      });
      // Each delivery recorded, and each push settled (the update that moves them answers them)...
      expect(sent).toBe(400);
      const moved = nodes(settled).filter((node) => node['Node Type'] === 'ModifyTable' && node['Relation Name'] === 'messages');
      expect(moved.reduce((sum, node) => sum + (node['Actual Rows'] ?? 0), 0)).toBe(200);
      // ...without going through the others.
      // Before: 80,000 pairs compared to record 400 deliveries of 200 pushes, 39,800 to settle them.
      expect(compared(recorded)).toBeLessThan(400);
      expect(compared(settled)).toBeLessThan(400);
    });
  });

  it('records a first try twice over (two workers, one lease lapsed) as one row, sent winning, and a repeated outcome once', async () => {
    await device('fcm');
    await device('hms');
    const pushId = await push();
    const { id } = (await named(pushId)).find((d) => d.provider === 'fcm')!;
    const sent = { deliveryId: id, status: 'sent' as const, providerMessageId: 'm-1' };
    const failed = { deliveryId: id, status: 'failed' as const, errorCode: 'unavailable', error: 'down' };
    const a = await db.pool.connect();
    const b = await db.pool.connect();
    try {
      await a.query('BEGIN');
      await b.query('BEGIN');
      await recordOutcomes(a, [failed], [pushId]);
      // b inserts the same row: it waits for a, then updates what a wrote.
      const bRecords = recordOutcomes(b, [sent, failed], [pushId, pushId]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await a.query('COMMIT');
      await bRecords;
      await b.query('COMMIT');
    } finally {
      a.release();
      b.release();
    }
    expect(await rowsOf(pushId)).toBe(1);
    expect(await delivery(id)).toMatchObject({ status: 'sent', providerMessageId: 'm-1', attempts: 2 });
  });

  it("keeps a pending delivery in the reconciler's index until it is final, and finds a push never tried", async () => {
    await device('fcm');
    await device('hms');
    const pushId = await push();
    const { id } = (await named(pushId)).find((d) => d.provider === 'fcm')!;
    const state = async () => (await db.pool.query(`SELECT status::text, open FROM deliveries WHERE id = $1`, [id])).rows[0];

    // Under a live lease it is not stranded, whatever its age; untried and unleased, it is.
    const claim = await claimDeliveries(db.pool, [pushId], 'fcm', 60_000);
    expect(claim.deliveries).toEqual([expect.objectContaining({ id })]);
    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 100_000)).not.toContain(pushId);
    await dropLeases(db.pool, [claim.leaseId!]);
    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 100_000)).toContain(pushId);
    // Touched: not again before afterMs has passed once more; never for another provider.
    expect(await takeStrandedPushes(db.pool, 'fcm', 60_000, 100_000)).not.toContain(pushId);
    expect(await takeStrandedPushes(db.pool, 'apns', 0, 100_000)).not.toContain(pushId);

    await recordOutcomes(db.pool, [{ deliveryId: id, status: 'pending', errorCode: 'unavailable', error: 'later' }], [pushId]);
    expect(await state()).toEqual({ status: 'pending', open: true });
    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 100_000)).toContain(pushId);

    expect((await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries).toEqual([expect.objectContaining({ id, attempts: 2 })]);
    await recordOutcomes(db.pool, [{ deliveryId: id, status: 'sent', providerMessageId: null }], [pushId]);
    expect(await state()).toEqual({ status: 'sent', open: null });
    expect(await settleMessages(db.pool, [pushId])).toEqual([{ id: pushId, status: 'sent', error: null }]);
    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 100_000)).not.toContain(pushId);
  });

  it("records and settles a job's pushes through their keys, without reading the rest of their day", async () => {
    await device('fcm');
    await device('hms');
    const pushes = [];
    for (let i = 0; i < 4; i++) pushes.push(...(await Promise.all(Array.from({ length: 500 }, () => push()))));
    const job = pushes.slice(0, 100);
    const claim = await claimDeliveries(db.pool, job, 'fcm', 60_000);
    expect(claim.deliveries).toHaveLength(100);
    const client = await db.pool.connect();
    try {
      const read = await rowsRead(client, async () => {
        await recordOutcomes(
          client,
          claim.deliveries.map((d) => ({ deliveryId: d.id, status: 'sent' as const, providerMessageId: null })),
          claim.deliveries.map((d) => d.messageId),
        );
        expect(await settleMessages(client, job)).toHaveLength(100);
      });
      // Each push and delivery is read a few times by key; reading the day would be 2,000 rows and more each time.
      expect(read).toBeGreaterThan(0);
      expect(read).toBeLessThan(1000);
    } finally {
      client.release();
    }
  });

  it("settles a job's pushes of several devices with events under ids the caller made, at consecutive positions before the transaction's next event", async () => {
    await device('fcm');
    await device('hms');
    const job = await Promise.all(Array.from({ length: 5 }, () => push()));
    const claim = await claimDeliveries(db.pool, job, 'fcm', 60_000);
    expect(claim.deliveries).toHaveLength(5);
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      // A sent delivery moves its push to sent; the others stay accepted, waiting for the hms device.
      await recordOutcomes(
        client,
        claim.deliveries.map((d, i) => (i < 3 ? { deliveryId: d.id, status: 'sent', providerMessageId: null } : { deliveryId: d.id, status: 'pending', errorCode: 'unavailable', error: 'later' })),
        claim.deliveries.map((d) => d.messageId),
      );
      const sentPushes = claim.deliveries.slice(0, 3).map((d) => d.messageId);
      // Given out of order and in capitals: the ids still go to the right pushes.
      const settled = await settleMessages(client, [...job].reverse().map((id) => id.toUpperCase()));
      expect(settled.map((row) => row.id).sort()).toEqual([...sentPushes].sort());
      await client.query(`INSERT INTO events (id, topic, ordering_key, status) VALUES (gen_random_uuid(), 'test.after', $1, 'sent')`, [job[0]]);
      await client.query('COMMIT');
      const { rows } = await db.pool.query<{ id: string; pushId: string | null; position: string; status: string }>(
        `SELECT id, push_id AS "pushId", feed_seq::text AS position, status FROM events WHERE push_id = ANY($1::uuid[]) OR (topic = 'test.after' AND ordering_key = $2) ORDER BY feed_seq`,
        [job, job[0]],
      );
      expect(rows.map((row) => row.pushId)).toEqual([...[...sentPushes].sort(), null]);
      expect(rows.map((row) => row.status)).toEqual(['sent', 'sent', 'sent', 'sent']);
      const positions = rows.map((row) => BigInt(row.position));
      expect(positions.slice(1).map((position, i) => position - positions[i])).toEqual([1n, 1n, 1n]);
      expect(rows.slice(0, 3).every((row) => row.id[14] === '7')).toBe(true);
      expect(new Set(rows.map((row) => row.id)).size).toBe(4);
    } finally {
      client.release();
    }
    await dropLeases(db.pool, [claim.leaseId!]);
  });

  it("reads a job's deliveries through push_deliveries, inlined, from their day's partitions only", async () => {
    await device('fcm');
    await device('hms');
    const job = await Promise.all(Array.from({ length: 20 }, () => push(uuidv7())));
    const claim = await claimDeliveries(db.pool, job, 'fcm', 60_000);
    await recordOutcomes(
      db.pool,
      claim.deliveries.map((d) => ({ deliveryId: d.id, status: 'sent' as const, providerMessageId: null })),
      claim.deliveries.map((d) => d.messageId),
    );
    const days = new Set(job.map(uuidV7Day));
    const planned = await plans(db, async (_sql, explaining) => {
      await readDeliveries(explaining, job);
      return settleMessages(explaining, job);
    });
    expect(planned).toHaveLength(2);
    for (const plan of planned) {
      expect(nodes(plan).filter((node) => node['Function Name'] === 'push_deliveries')).toEqual([]);
      const scanned = nodes(plan).filter((node) => node['Relation Name'] && node['Node Type'] !== 'ModifyTable');
      const read = new Set(scanned.map((node) => node['Relation Name']));
      expect(read).toEqual(new Set([...days].flatMap((day) => [partitionName('messages', day), partitionName('deliveries', day)])));
    }
  });

  it('claims pushes of several devices without running push_deliveries as a function, which is planned at every call', async () => {
    await device('fcm');
    await device('hms');
    const job = await Promise.all(Array.from({ length: 10 }, () => push()));
    const client = await db.pool.connect();
    const calls = async () =>
      (await client.query<{ calls: number }>(`SELECT COALESCE(pg_stat_get_xact_function_calls('push_deliveries(uuid[], date[])'::regprocedure), 0)::int AS calls`)).rows[0].calls;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL track_functions = 'all'`);
      const claim = await claimDeliveries(client, job, 'hms', 60_000);
      expect(claim.deliveries).toHaveLength(10);
      // A call PostgreSQL inlines into the statement is not counted; one it runs as a function is.
      expect(await calls()).toBe(0);
      await client.query(`SELECT count(*) FROM push_deliveries(ARRAY(SELECT unnest($1::uuid[])), $2::date[])`, [job, [uuidV7Day(job[0])]]);
      expect(await calls()).toBe(1);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it("claims a job's deliveries reading their devices by key, however many devices there are", async () => {
    // Devices of other players: a scan of the table would read every one of them.
    await db.pool.query(
      `INSERT INTO devices (id, brand_id, user_id, provider, platform, token, active, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'other-' || n, 'fcm', 'android', 'token-' || n || '-' || $2, true, now(), now() FROM generate_series(1, 30000) AS n`,
      [uniqueBrandId(), randomUUID()],
    );
    await db.pool.query('ANALYZE devices');
    await device('fcm');
    const job = await Promise.all(Array.from({ length: 100 }, () => push()));
    const devicesRead = async () => {
      await db.pool.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await db.pool.query<{ n: string }>(
        `SELECT (COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0))::text AS n FROM pg_stat_user_tables WHERE relname = 'devices'`,
      );
      return Number(rows[0].n);
    };
    const client = await db.pool.connect();
    try {
      // What a burst's estimates (a few hundred deliveries a job, from stale statistics) made the
      // planner choose: a hash join, over the whole table, wherever a join is left to it.
      await client.query('SET enable_nestloop = off');
      await client.query('SELECT pg_stat_force_next_flush()');
      const before = await devicesRead();
      const claim = await claimDeliveries(client, job, 'fcm', 60_000);
      expect(claim.deliveries).toHaveLength(100);
      expect(claim.deliveries.every((d) => d.token !== null)).toBe(true);
      await client.query('SELECT pg_stat_force_next_flush()');
      // One device read per delivery; the table holds more than 30,000.
      expect((await devicesRead()) - before).toBeLessThan(1000);
    } finally {
      await client.query('RESET enable_nestloop');
      client.release();
    }
  });

  it('settles a message sent as soon as one delivery is sent, failed once every one failed, with its status event', async () => {
    await device('fcm');
    await device('apns');
    const sentPush = await push();
    const failedPush = await push();
    const fcmClaim = await claimDeliveries(db.pool, [sentPush, failedPush], 'fcm', 60_000);
    const apnsClaim = await claimDeliveries(db.pool, [sentPush, failedPush], 'apns', 60_000);
    const claimed = [...fcmClaim.deliveries, ...apnsClaim.deliveries];
    const of = (pushId: string) => claimed.filter((d) => d.messageId === pushId);

    await recordOutcomes(
      db.pool,
      [
        { deliveryId: of(sentPush)[0].id, status: 'sent', providerMessageId: null },
        { deliveryId: of(failedPush)[0].id, status: 'failed', errorCode: 'unregistered', error: 'gone' },
      ],
      [sentPush, failedPush],
    );
    // One sent is enough; the other push has a delivery not tried yet.
    expect(await settleMessages(db.pool, [sentPush, failedPush])).toEqual([{ id: sentPush, status: 'sent', error: null }]);

    await recordOutcomes(db.pool, [{ deliveryId: of(failedPush)[1].id, status: 'failed', errorCode: 'bad-token', error: 'bad' }], [failedPush]);
    expect(await settleMessages(db.pool, [sentPush, failedPush])).toEqual([{ id: failedPush, status: 'failed', error: 'bad-token, unregistered' }]);

    const { rows } = await db.pool.query(
      `SELECT push_id AS "pushId", topic, status, error FROM events WHERE push_id = ANY($1::uuid[]) ORDER BY status DESC`,
      [[sentPush, failedPush]],
    );
    expect(rows).toEqual([
      { pushId: sentPush, topic: 'push.status', status: 'sent', error: null },
      { pushId: failedPush, topic: 'push.status', status: 'failed', error: 'bad-token, unregistered' },
    ]);
    expect(await settleMessages(db.pool, [sentPush, failedPush])).toEqual([]);

    // The push sent through FCM still names its APNs delivery, never tried: it stays open, and the
    // APNs reconciler finds it once no lease holds it. Its last outcome closes it, with no new event.
    const openOf = async (pushId: string) => (await db.pool.query(`SELECT open FROM messages WHERE id = $1`, [pushId])).rows[0].open;
    expect([await openOf(sentPush), await openOf(failedPush)]).toEqual([true, null]);
    await dropLeases(db.pool, [fcmClaim.leaseId!, apnsClaim.leaseId!]);
    expect(await takeStrandedPushes(db.pool, 'apns', 0, 100_000)).toContain(sentPush);
    const apnsOfSent = of(sentPush).find((d) => !claimed.slice(0, fcmClaim.deliveries.length).includes(d))!;
    await recordOutcomes(db.pool, [{ deliveryId: apnsOfSent.id, status: 'failed', errorCode: 'unregistered', error: 'gone' }], [sentPush]);
    expect(await settleMessages(db.pool, [sentPush])).toEqual([]);
    expect(await openOf(sentPush)).toBeNull();
    expect(await takeStrandedPushes(db.pool, 'apns', 0, 100_000)).not.toContain(sentPush);
    expect((await db.pool.query(`SELECT status FROM events WHERE push_id = $1`, [sentPush])).rows).toEqual([{ status: 'sent' }]);
  });
});
