import { randomUUID } from 'node:crypto';
import { apnsToken, fcmToken, uniqueBrandId, uniqueName } from '@operator/testing';
import { closeDb, createDb, type Db } from './client';
import { deactivateDevices } from './deliveries';
import { deleteDevice, listPlayerDevices, registerDevice, type DeviceRegistration } from './devices';

// Devices against PostgreSQL: a token is one device, whoever registers it again; a device the
// provider declared dead is active again once registered again.

describe('devices (PostgreSQL)', () => {
  let db: Db;
  let brand: bigint;
  let player: string;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
  });
  afterAll(() => closeDb(db));
  beforeEach(() => {
    brand = BigInt(uniqueBrandId());
    player = uniqueName('player');
  });

  const registration = (overrides: Partial<DeviceRegistration> = {}): DeviceRegistration => ({
    brandId: brand,
    userId: player,
    provider: 'apns',
    platform: 'ios',
    token: apnsToken(),
    p256dh: null,
    auth: null,
    ...overrides,
  });

  it('registers a device once per token: registered again, it moves to the new player and brand', async () => {
    const first = registration();
    const created = await registerDevice(db, randomUUID(), first);
    expect(created.created).toBe(true);
    expect(created.device).toMatchObject({ brandId: brand, userId: player, provider: 'apns', platform: 'ios', token: first.token, active: true });

    const otherBrand = BigInt(uniqueBrandId());
    const moved = await registerDevice(db, randomUUID(), { ...first, brandId: otherBrand, userId: 'another-player', platform: null });

    expect(moved.created).toBe(false);
    expect(moved.device).toMatchObject({ id: created.device.id, brandId: otherBrand, userId: 'another-player', platform: 'ios' });
    expect(await listPlayerDevices(db, player)).toEqual([]);
  });

  it('the same token with another provider is another device', async () => {
    const token = fcmToken();
    const fcm = await registerDevice(db, randomUUID(), registration({ provider: 'fcm', platform: 'android', token }));
    const web = await registerDevice(db, randomUUID(), registration({ provider: 'webpush', platform: 'web', token, p256dh: 'k', auth: 'a' }));

    expect(web.created).toBe(true);
    expect(web.device.id).not.toBe(fcm.device.id);
  });

  it('deactivates a dead device once, and a new registration makes it active again', async () => {
    const { device } = await registerDevice(db, randomUUID(), registration());

    await deactivateDevices(db.pool, [{ id: device.id, reason: 'BadDeviceToken' }]);
    const [dead] = await listPlayerDevices(db, player);
    expect(dead).toMatchObject({ active: false, deactivatedReason: 'BadDeviceToken', deactivatedAt: expect.any(Date) });

    // Already inactive: the first reason and time stay.
    await deactivateDevices(db.pool, [{ id: device.id, reason: 'Unregistered' }]);
    expect(await listPlayerDevices(db, player)).toEqual([dead]);

    const again = await registerDevice(db, randomUUID(), registration({ token: device.token }));
    expect(again).toEqual({ created: false, device: expect.objectContaining({ id: device.id, active: true, deactivatedAt: null, deactivatedReason: null }) });
  });

  it("lists a player's devices in one brand or in all, oldest first, and deletes one", async () => {
    const otherBrand = BigInt(uniqueBrandId());
    const a = await registerDevice(db, randomUUID(), registration());
    await new Promise((resolve) => setTimeout(resolve, 5)); // created_at keeps milliseconds
    const b = await registerDevice(db, randomUUID(), registration({ brandId: otherBrand, provider: 'fcm', platform: 'android', token: fcmToken() }));

    expect((await listPlayerDevices(db, player)).map((d) => d.id)).toEqual([a.device.id, b.device.id]);
    expect((await listPlayerDevices(db, player, otherBrand)).map((d) => d.id)).toEqual([b.device.id]);

    expect(await deleteDevice(db, a.device.id)).toBe(true);
    expect(await deleteDevice(db, a.device.id)).toBe(false);
    expect((await listPlayerDevices(db, player)).map((d) => d.id)).toEqual([b.device.id]);
  });
});
