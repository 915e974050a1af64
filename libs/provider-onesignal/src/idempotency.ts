import { createHash } from 'node:crypto';

// OneSignal creates at most one notification per idempotency_key within 30 days. A key is a function
// of the push and its deliveries only, so a re-run after a crash sends the same keys and is answered
// from OneSignal's record; a different set of deliveries makes a new key and may send again.

/** A random UUID picked once, so no other name-based UUID can collide with ours (RFC 9562, 6.6). */
export const IDEMPOTENCY_NAMESPACE = 'a4a3c1f2-5d7e-4b0c-9f61-2c8e3d9b7a15';

/** Version 3 (RFC 9562, 5.3), as OneSignal takes; MD5 only spreads names made of our own ids. */
export function nameBasedUuid(namespace: string, name: string): string {
  const space = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  if (space.length !== 16) throw new Error(`not a UUID: ${namespace}`);
  const bytes = createHash('md5').update(space).update(name, 'utf8').digest();
  bytes[6] = (bytes[6] & 0x0f) | 0x30;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The same for these deliveries in whatever order they come. */
export function idempotencyKey(pushId: string, deliveryIds: readonly string[]): string {
  return nameBasedUuid(IDEMPOTENCY_NAMESPACE, JSON.stringify([pushId, ...[...deliveryIds].sort()]));
}

/** Runs in delivery id order, so a re-run of failed batches makes the same batches, each with its key. */
export function batches<T extends { deliveryId: string }>(items: readonly T[], size: number): T[][] {
  const sorted = [...items].sort((a, b) => (a.deliveryId < b.deliveryId ? -1 : a.deliveryId > b.deliveryId ? 1 : 0));
  const runs: T[][] = [];
  for (let at = 0; at < sorted.length; at += size) runs.push(sorted.slice(at, at + size));
  return runs;
}
