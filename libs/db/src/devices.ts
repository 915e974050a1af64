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
  const rows = await db.$queryRaw<{ id: string; created: boolean }[]>`
    INSERT INTO devices (id, brand_id, user_id, provider, platform, token, p256dh, auth, active, created_at, updated_at)
    VALUES (${id}::uuid, ${device.brandId}, ${device.userId}, ${device.provider}::text,
            ${device.platform}::"Platform", ${device.token}, ${device.p256dh}, ${device.auth}, true, now(), now())
    ON CONFLICT (provider, token) DO UPDATE SET
      brand_id = EXCLUDED.brand_id, user_id = EXCLUDED.user_id,
      platform = COALESCE(EXCLUDED.platform, devices.platform),
      p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth,
      active = true, deactivated_at = NULL, deactivated_reason = NULL, updated_at = now()
    RETURNING id::text AS id, (xmax = 0) AS created`;
  const row = rows[0];
  return { device: await db.device.findUniqueOrThrow({ where: { id: row.id } }), created: row.created };
}

export function listPlayerDevices(db: DbTx, userId: string, brandId?: bigint): Promise<Device[]> {
  return db.device.findMany({
    where: { userId, ...(brandId === undefined ? {} : { brandId }) },
    orderBy: { createdAt: 'asc' },
  });
}

export async function deleteDevice(db: DbTx, id: string): Promise<boolean> {
  const { count } = await db.device.deleteMany({ where: { id } });
  return count > 0;
}
