import { randomUUID } from 'node:crypto';
import { fcmToken, uniqueBrandId, uniqueId, uniqueName } from '@operator/testing';
import { closeDb, createDb, type Db } from './client';
import { claimDeliveries, extendClaims, recordOutcomes, releaseClaims, settleMessages, takeStrandedPushes } from './deliveries';
import { deleteDevice, registerDevice } from './devices';
import { storeMessages } from './messages';

// A push's deliveries against PostgreSQL: a worker claims them (no other worker sends them while
// the claim lasts), records what became of each (a late `sent` wins over a failure), and the
// message settles from them.

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

  const device = (provider: 'fcm' | 'apns') =>
    registerDevice(db, randomUUID(), {
      brandId: BigInt(brand),
      userId: player,
      provider,
      platform: provider === 'fcm' ? 'android' : 'ios',
      token: fcmToken(),
      p256dh: null,
      auth: null,
    });

  /** A push accepted for the player's devices: its id. */
  async function push(): Promise<string> {
    const id = randomUUID();
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
              claimed_at IS NOT NULL AS claimed, sent_at IS NOT NULL AS "sentAt"
         FROM deliveries WHERE id = $1`,
      [id],
    );
    return rows[0];
  }

  it("claims the provider's pending deliveries with their device and message, once", async () => {
    const fcm = await device('fcm');
    await device('apns');
    const pushId = await push();

    const claim = await claimDeliveries(db.pool, [pushId, pushId], 'fcm', 60_000);

    expect(claim.deliveries).toEqual([
      {
        id: expect.any(String),
        messageId: pushId,
        deviceId: fcm.device.id,
        token: fcm.device.token,
        platform: 'android',
        p256dh: null,
        auth: null,
        deviceActive: true,
        attempts: 1,
        alone: false,
      },
    ]);
    expect(claim.messages).toEqual(new Map([[pushId, { id: pushId, brandId: String(brand), payload: { title: 'hello' } }]]));
    expect(claim).toMatchObject({ heldElsewhere: 0, missing: [] });
    expect(await delivery(claim.deliveries[0].id)).toMatchObject({ status: 'sending', attempts: 1, claimed: true });

    const again = await claimDeliveries(db.pool, [pushId], 'fcm', 60_000);
    expect(again).toMatchObject({ deliveries: [], heldElsewhere: 1, missing: [] });
    expect(again.messages.size).toBe(0);
  });

  it('takes again a claim older than the lease, and a claim given back', async () => {
    await device('fcm');
    const pushId = await push();
    const [first] = (await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries;

    await new Promise((resolve) => setTimeout(resolve, 10)); // claimed_at keeps milliseconds: let one pass
    const [lapsed] = (await claimDeliveries(db.pool, [pushId], 'fcm', 0)).deliveries;
    expect(lapsed.id).toBe(first.id);
    expect(await delivery(first.id)).toMatchObject({ status: 'sending', attempts: 2 });

    expect(await releaseClaims(db.pool, [first.id])).toBe(1);
    expect(await delivery(first.id)).toMatchObject({ status: 'pending', claimed: false });
    expect((await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries.map((d) => d.id)).toEqual([first.id]);
  });

  it('answers the pushes it cannot find, and a delivery whose device was removed without a token', async () => {
    await device('fcm');
    const pushId = await push();
    const [{ device_id: deviceId }] = (await db.pool.query('SELECT device_id FROM deliveries WHERE message_id = $1', [pushId])).rows;
    expect(await deleteDevice(db, deviceId)).toBe(true);
    const unknown = randomUUID();

    const claim = await claimDeliveries(db.pool, [pushId, unknown], 'fcm', 60_000);

    expect(claim.missing).toEqual([unknown]);
    expect(claim.deliveries).toEqual([expect.objectContaining({ messageId: pushId, deviceId: null, token: null, platform: null, deviceActive: false })]);
  });

  it('records outcomes only on deliveries being sent, except that a late sent wins over a failure', async () => {
    await device('fcm');
    await device('apns');
    const pushId = await push();
    const [fcm] = (await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries;
    const [apns] = (await claimDeliveries(db.pool, [pushId], 'apns', 60_000)).deliveries;

    await recordOutcomes(db.pool, [
      { deliveryId: fcm.id, status: 'failed', errorCode: 'unavailable', error: 'x'.repeat(2000) },
      { deliveryId: apns.id, status: 'pending', errorCode: 'rate-limited', error: 'retry later' },
    ]);
    expect(await delivery(fcm.id)).toEqual({ status: 'failed', attempts: 1, providerMessageId: null, errorCode: 'unavailable', error: 'x'.repeat(1000), claimed: false, sentAt: false });
    expect(await delivery(apns.id)).toMatchObject({ status: 'pending', errorCode: 'rate-limited', error: 'retry later', claimed: false });

    // Neither a failure nor a retry replaces an outcome recorded since; a sent does.
    await recordOutcomes(db.pool, [{ deliveryId: apns.id, status: 'failed', errorCode: 'late', error: 'late' }]);
    expect(await delivery(apns.id)).toMatchObject({ status: 'pending', errorCode: 'rate-limited' });
    await recordOutcomes(db.pool, [{ deliveryId: fcm.id, status: 'sent', providerMessageId: 'projects/p/messages/1' }]);
    expect(await delivery(fcm.id)).toEqual({ status: 'sent', attempts: 1, providerMessageId: 'projects/p/messages/1', errorCode: null, error: null, claimed: false, sentAt: true });
    await recordOutcomes(db.pool, [{ deliveryId: fcm.id, status: 'failed', errorCode: 'late', error: 'late' }]);
    expect(await delivery(fcm.id)).toMatchObject({ status: 'sent', errorCode: null });
  });

  it("keeps a delivery in the reconciler's index until it is final, and leaves updated_at to the record", async () => {
    await device('fcm');
    const pushId = await push();
    const state = async (id: string) =>
      (await db.pool.query(`SELECT status::text, open, updated_at AS "updatedAt" FROM deliveries WHERE id = $1`, [id])).rows[0];
    const [{ id }] = (await db.pool.query('SELECT id FROM deliveries WHERE message_id = $1', [pushId])).rows;
    const accepted = await state(id);
    expect(accepted).toMatchObject({ status: 'pending', open: true });

    // The claim and its renewals change no indexed column: the reconciler tells a live claim by claimed_at.
    // The push's one delivery: its message is settled without a lock first.
    expect((await claimDeliveries(db.pool, [pushId], 'fcm', 60_000)).deliveries).toEqual([expect.objectContaining({ id, alone: true })]);
    await extendClaims(db.pool, [id]);
    expect(await state(id)).toEqual({ status: 'sending', open: true, updatedAt: accepted.updatedAt });
    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 60_000, 100_000)).not.toContain(pushId);

    await recordOutcomes(db.pool, [{ deliveryId: id, status: 'pending', errorCode: 'unavailable', error: 'later' }]);
    expect(await state(id)).toMatchObject({ status: 'pending', open: true });
    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 60_000, 100_000)).toContain(pushId);

    await claimDeliveries(db.pool, [pushId], 'fcm', 60_000);
    await recordOutcomes(db.pool, [{ deliveryId: id, status: 'sent', providerMessageId: null }]);
    expect(await state(id)).toMatchObject({ status: 'sent', open: null });
  });

  it('takes out of the index of open deliveries one found final (recorded by a worker that did not know the index)', async () => {
    await device('fcm');
    const pushId = await push();
    const [{ id }] = (await db.pool.query('SELECT id FROM deliveries WHERE message_id = $1', [pushId])).rows;
    await db.pool.query(`UPDATE deliveries SET status = 'sent', sent_at = now() WHERE id = $1`, [id]);

    expect(await takeStrandedPushes(db.pool, 'fcm', 0, 60_000, 100_000)).not.toContain(pushId);
    expect((await db.pool.query('SELECT open FROM deliveries WHERE id = $1', [id])).rows[0]).toEqual({ open: null });
  });

  it('settles a message sent as soon as one delivery is sent, failed once every one failed, with its status event', async () => {
    await device('fcm');
    await device('apns');
    const sentPush = await push();
    const failedPush = await push();
    const claimed = [
      ...(await claimDeliveries(db.pool, [sentPush, failedPush], 'fcm', 60_000)).deliveries,
      ...(await claimDeliveries(db.pool, [sentPush, failedPush], 'apns', 60_000)).deliveries,
    ];
    const of = (pushId: string) => claimed.filter((d) => d.messageId === pushId);

    await recordOutcomes(db.pool, [
      { deliveryId: of(sentPush)[0].id, status: 'sent', providerMessageId: null },
      { deliveryId: of(failedPush)[0].id, status: 'failed', errorCode: 'unregistered', error: 'gone' },
    ]);
    // One sent is enough; the other failure is still open.
    expect(await settleMessages(db.pool, [sentPush, failedPush])).toEqual([{ id: sentPush, status: 'sent', error: null }]);

    await recordOutcomes(db.pool, [{ deliveryId: of(failedPush)[1].id, status: 'failed', errorCode: 'bad-token', error: 'bad' }]);
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
  });
});
