import type { BrandSet } from '@operator/config';
import type { Platform, ProviderName } from '@operator/contract';
import type { DbTx, Sql } from './client';
import type { Device } from './generated/client';

export type { Device };

export interface DeviceTarget {
  brandId: bigint;
  userId: string;
}

export interface DeviceRegistration extends DeviceTarget {
  provider: ProviderName;
  platform: Platform | null;
  token: string;
  p256dh: string | null;
  auth: string | null;
}

/**
 * Registers a device or refreshes it. A token is one device: registered again, by the same or
 * another player, it moves to that player and brand and becomes active again.
 */
export async function registerDevice(db: DbTx, id: string, device: DeviceRegistration): Promise<{ device: Device; created: boolean }> {
  return (await registerDeviceOf(db, id, device, null))!;
}

/**
 * registerDevice for a credential of `brands` (null: every brand): a token already registered to a
 * device of another brand stays as it is and the answer is undefined, so such a credential cannot
 * take another brand's device.
 */
export async function registerDeviceOf(
  db: DbTx,
  id: string,
  device: DeviceRegistration,
  brands: BrandSet,
): Promise<{ device: Device; created: boolean } | undefined> {
  const rows = await db.$queryRaw<{ id: string; created: boolean }[]>`
    INSERT INTO devices (id, brand_id, user_id, provider, platform, token, p256dh, auth, active, created_at, updated_at)
    VALUES (${id}::uuid, ${device.brandId}, ${device.userId}, ${device.provider}::text,
            ${device.platform}::"Platform", ${device.token}, ${device.p256dh}, ${device.auth}, true, now(), now())
    ON CONFLICT (provider, token) DO UPDATE SET
      brand_id = EXCLUDED.brand_id, user_id = EXCLUDED.user_id,
      platform = COALESCE(EXCLUDED.platform, devices.platform),
      p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth,
      active = true, deactivated_at = NULL, deactivated_reason = NULL, updated_at = now()
      WHERE ${brands === null} OR devices.brand_id = ANY(${brands ?? []}::bigint[])
    RETURNING id::text AS id, (xmax = 0) AS created`;
  const row = rows[0];
  if (!row) return undefined;
  return { device: await db.device.findUniqueOrThrow({ where: { id: row.id } }), created: row.created };
}

/** A player's devices, of one brand when `brandId` is given, of `brands` only (null: every brand). */
export function listPlayerDevices(db: DbTx, userId: string, brandId?: bigint, brands: BrandSet = null): Promise<Device[]> {
  const inBrands = brands === null ? [] : [{ brandId: { in: brands.map(BigInt) } }];
  return db.device.findMany({
    where: { userId, AND: [...(brandId === undefined ? [] : [{ brandId }]), ...inBrands] },
    orderBy: { createdAt: 'asc' },
  });
}

/** Deletes a device of `brands` (null: of any brand); false when there is none. */
export async function deleteDevice(db: DbTx, id: string, brands: BrandSet = null): Promise<boolean> {
  const { count } = await db.device.deleteMany({ where: { id, ...(brands === null ? {} : { brandId: { in: brands.map(BigInt) } }) } });
  return count > 0;
}
