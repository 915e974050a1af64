import { randomUUID } from 'node:crypto';
import { fcmToken, uniqueBrandId, uniqueId, uniqueName } from '@operator/testing';
import { v7 as uuidv7 } from 'uuid';
import { closeDb, createDb, type Db } from './client';
import { deactivateDevices } from './deliveries';
import { registerDevice } from './devices';
import { acceptIsolation, findPushIds, storeMessages, type NewMessage } from './messages';
import { dayOf, partitionName } from './partitions';

// Accepting pushes against PostgreSQL: a message is stored once per (brand, CRM id) whatever the
// retries, only for a player with an active device in its brand, with one delivery per device.

describe('storeMessages (PostgreSQL)', () => {
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

  const message = (overrides: Partial<NewMessage> = {}): NewMessage => ({
    id: uuidv7(),
    brandId: BigInt(brand),
    crmMessageId: BigInt(uniqueId()),
    userId: player,
    activityId: 71n,
    actionGroupId: 72n,
    actionId: 73n,
    triggerHash: uniqueName('trigger'),
    origin: null,
    payload: { title: 'Weekend reload', extra: { kept: true } },
    meta: null,
    crmHeaders: { 'service-id': 'crm-1' },
    ...overrides,
  });

  const device = (provider: 'fcm' | 'webpush', brandId = brand, userId = player) =>
    registerDevice(db, randomUUID(), {
      brandId: BigInt(brandId),
      userId,
      provider,
      platform: provider === 'fcm' ? 'android' : 'web',
      token: provider === 'fcm' ? fcmToken() : `https://push.example.test/${randomUUID()}`,
      p256dh: provider === 'fcm' ? null : 'p256dh',
      auth: provider === 'fcm' ? null : 'auth',
    });

  /** The deliveries a message names (none has a row until a try of it has an outcome). */
  async function deliveriesOf(messageId: string) {
    const { rows } = await db.pool.query<{ provider: string; device_id: string; rows: number }>(
      `SELECT u.provider::text, u.device_id, (SELECT count(*)::int FROM deliveries d WHERE d.id = u.id) AS rows
         FROM messages m CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) AS u(id, device_id, provider)
        WHERE m.id = $1 ORDER BY u.provider`,
      [messageId],
    );
    return rows;
  }

  it('stores a message naming one delivery per active device of its player in its brand', async () => {
    const fcm = await device('fcm');
    const web = await device('webpush');
    await device('fcm', uniqueBrandId()); // the same player in another brand
    const m = message();

    const [stored] = await storeMessages(db.pool, [m]);

    expect(stored).toEqual({ knownId: null, insertedId: m.id, reachable: true, providers: expect.arrayContaining(['fcm', 'webpush']) });
    expect(stored.providers).toHaveLength(2);
    expect(await deliveriesOf(m.id)).toEqual([
      { provider: 'fcm', device_id: fcm.device.id, rows: 0 },
      { provider: 'webpush', device_id: web.device.id, rows: 0 },
    ]);
  });

  it("names its first delivery by the id given with it, and makes the others' (and one given none)", async () => {
    await device('fcm');
    await device('webpush');
    const given = message({ deliveryId: uuidv7() });
    const none = message();
    await storeMessages(db.pool, [given, none]);

    const idsOf = async (messageId: string) =>
      (await db.pool.query<{ ids: string[] }>('SELECT delivery_ids::text[] AS ids FROM messages WHERE id = $1', [messageId])).rows[0].ids;
    const [first, second] = await idsOf(given.id);
    expect(first).toBe(given.deliveryId);
    const made = [second, ...(await idsOf(none.id))];
    expect(made).toHaveLength(3);
    for (const id of made) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set([first, ...made]).size).toBe(4);
  });

  it('answers the first push id for a key accepted before, and stores nothing more', async () => {
    await device('fcm');
    const first = message();
    await storeMessages(db.pool, [first]);

    const retry = { ...first, id: uuidv7(), triggerHash: 'another' };
    const [stored] = await storeMessages(db.pool, [retry]);

    expect(stored).toEqual({ knownId: first.id, insertedId: null, reachable: true, providers: [] });
    const { rows } = await db.pool.query('SELECT id FROM messages WHERE brand_id = $1', [brand]);
    expect(rows).toEqual([{ id: first.id }]);
    expect(await deliveriesOf(first.id)).toHaveLength(1);
    expect(await findPushIds(db.pool, [first, { brandId: BigInt(brand), crmMessageId: first.crmMessageId + 1n }])).toEqual(
      new Map([[`${brand}:${first.crmMessageId}`, first.id]]),
    );
  });

  it('finds a push accepted on an earlier day (in its day partition) as a retry today, within the dedupe window', async () => {
    await device('fcm');
    const yesterday = Date.now() - 86_400_000;
    const first = message({ id: uuidv7({ msecs: yesterday }) });
    expect(await storeMessages(db.pool, [first])).toEqual([{ knownId: null, insertedId: first.id, reachable: true, providers: ['fcm'] }]);
    const { rows: where } = await db.pool.query('SELECT tableoid::regclass::text AS partition FROM messages WHERE id = $1', [first.id]);
    expect(where).toEqual([{ partition: partitionName('messages', dayOf(yesterday)) }]);

    const retry = { ...first, id: uuidv7() };
    expect(await storeMessages(db.pool, [retry])).toEqual([{ knownId: first.id, insertedId: null, reachable: true, providers: [] }]);
    expect(await findPushIds(db.pool, [first], { dedupeDays: 1 })).toEqual(new Map([[`${brand}:${first.crmMessageId}`, first.id]]));

    // A window of today only does not look at yesterday: the same key is a new push today.
    expect(await findPushIds(db.pool, [first], { dedupeDays: 0 })).toEqual(new Map());
    expect(await storeMessages(db.pool, [retry], { dedupeDays: 0 })).toEqual([{ knownId: null, insertedId: retry.id, reachable: true, providers: ['fcm'] }]);
    const { rows } = await db.pool.query('SELECT id FROM messages WHERE brand_id = $1 ORDER BY id', [brand]);
    expect(rows).toEqual([{ id: first.id }, { id: retry.id }]);
  });

  it('stores a key given twice in one batch once', async () => {
    await device('fcm');
    const m = message();

    const stored = await storeMessages(db.pool, [m, { ...m, id: uuidv7() }]);

    expect(stored.filter((s) => s.insertedId)).toHaveLength(1);
    expect(stored.every((s) => s.knownId === null && s.reachable)).toBe(true);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM messages WHERE brand_id = $1', [brand]);
    expect(rows[0].n).toBe(1);
  });

  it('stores nothing for a player without an active device in the brand, and keeps the order given', async () => {
    const dead = await device('fcm');
    await deactivateDevices(db.pool, [{ id: dead.device.id, reason: 'unregistered' }]);
    const reachablePlayer = uniqueName('player');
    await device('fcm', brand, reachablePlayer);
    const nobody = message({ userId: uniqueName('nobody') });
    const deactivated = message();
    const reachable = message({ userId: reachablePlayer });

    const stored = await storeMessages(db.pool, [nobody, reachable, deactivated]);

    expect(stored).toEqual([
      { knownId: null, insertedId: null, reachable: false, providers: [] },
      { knownId: null, insertedId: reachable.id, reachable: true, providers: ['fcm'] },
      { knownId: null, insertedId: null, reachable: false, providers: [] },
    ]);
    expect(await findPushIds(db.pool, [nobody, deactivated])).toEqual(new Map());
  });

  it('keeps the meta text byte for byte and the payload with its unknown fields', async () => {
    await device('fcm');
    const meta = '{"b": 1,   "a": [2, 1], "nested": {"z": null}}';
    const m = message({ meta });

    await storeMessages(db.pool, [m]);

    const { rows } = await db.pool.query('SELECT meta::text AS meta, payload, crm_headers FROM messages WHERE id = $1', [m.id]);
    expect(rows[0]).toEqual({ meta, payload: m.payload, crm_headers: m.crmHeaders });
  });

  it('answers nothing for no messages', async () => {
    expect(await storeMessages(db.pool, [])).toEqual([]);
    expect(await findPushIds(db.pool, [])).toEqual(new Map());
  });
});

describe('acceptIsolation', () => {
  const at = (time: string) => acceptIsolation(Date.parse(`2026-11-26T${time}Z`));

  it('is serializable within five minutes of midnight (UTC), where two attempts of a push may fall on two days, read committed otherwise', () => {
    expect(['23:55:00.001', '23:59:59.999', '00:00:00.000', '00:04:59.999'].map(at)).toEqual(Array(4).fill('serializable'));
    expect(['00:05:00.000', '12:00:00.000', '23:55:00.000'].map(at)).toEqual(Array(3).fill('read committed'));
  });
});
