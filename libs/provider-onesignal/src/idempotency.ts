import { createHash } from 'node:crypto';

// OneSignal creates at most one notification per idempotency_key within 30 days. A key is a
// function of the push and its deliveries only, so a re-run after a crash (which claims exactly the
// unrecorded deliveries, recorded together per send) sends the same keys and is answered from
// OneSignal's record. A different set (a device removed between runs, two partial claims both
// lost, a re-run after 30 days) makes a new key and may send again.

/**
 * Our namespace for name-based keys (RFC 9562, 6.6): a random UUID picked once for this purpose,
 * so that no other name-based UUID can collide with ours.
 */
export const IDEMPOTENCY_NAMESPACE = 'a4a3c1f2-5d7e-4b0c-9f61-2c8e3d9b7a15';

/**
 * A name-based UUID, version 3 (RFC 9562, 5.3): OneSignal documents its keys as "v3 or v4 UUID".
 * MD5 only spreads the name; every name is made of our own ids, so collisions on purpose are moot.
 */
export function nameBasedUuid(namespace: string, name: string): string {
  const space = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  if (space.length !== 16) throw new Error(`not a UUID: ${namespace}`);
  const bytes = createHash('md5').update(space).update(name, 'utf8').digest();
  bytes[6] = (bytes[6] & 0x0f) | 0x30;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The idempotency_key of the request that sends `pushId` to these deliveries, in whatever order they come. */
export function idempotencyKey(pushId: string, deliveryIds: readonly string[]): string {
  return nameBasedUuid(IDEMPOTENCY_NAMESPACE, JSON.stringify([pushId, ...[...deliveryIds].sort()]));
}

/**
 * Items cut into runs of at most `size`, in delivery id order: a re-run of the batches that failed
 * while others went through makes those same batches again, each with its key.
 */
export function batches<T extends { deliveryId: string }>(items: readonly T[], size: number): T[][] {
  const sorted = [...items].sort((a, b) => (a.deliveryId < b.deliveryId ? -1 : a.deliveryId > b.deliveryId ? 1 : 0));
  const runs: T[][] = [];
  for (let at = 0; at < sorted.length; at += size) runs.push(sorted.slice(at, at + size));
  return runs;
}
