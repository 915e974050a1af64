import { createHash } from 'node:crypto';

// OneSignal creates at most one notification per idempotency_key (within 30 days): a request
// repeated with the same key is answered with the first one's result and sends nothing more
// (https://documentation.onesignal.com/reference/idempotent-notification-requests).
//
// The key of a request is a function of what it sends: the push and the deliveries in it. Nothing
// random and nothing held in memory goes into it, so a worker that was killed after OneSignal took
// a request and before the outcomes were recorded, and whichever worker takes those deliveries
// over, send the same key, and OneSignal answers the second from its record instead of sending
// again. That holds because of how deliveries are claimed and recorded (@operator/push):
// - one send() carries every delivery of a push that one claim took; the claim is one statement,
//   and the deliveries it took share one lease, so they come free again together;
// - the outcomes of one send() are recorded together, so after a crash either all of them are in
//   PostgreSQL or none is, and a re-run claims exactly the deliveries that were not recorded: the
//   same set, which makes the same requests (batches() cuts a sorted list, so a re-run of the
//   batches that failed while others went through makes those same batches again).
// What breaks the bound, each time by making a different set: a device removed or deactivated
// between the two runs (its delivery is left out of the re-run); two workers that had each
// claimed part of one push's deliveries at once and both died (a re-run claims the two parts
// together); and a re-run more than 30 days later, when OneSignal has forgotten the key.

/**
 * Our namespace for name-based keys (RFC 9562, 6.6): a random UUID picked once for this purpose,
 * so that no other name-based UUID can collide with ours.
 */
export const IDEMPOTENCY_NAMESPACE = 'a4a3c1f2-5d7e-4b0c-9f61-2c8e3d9b7a15';

/**
 * A name-based UUID, version 3 (RFC 9562, 5.3): MD5 over the namespace's 16 bytes and the name's
 * UTF-8. Version 3 rather than 5 because OneSignal has documented its keys as "v3 or v4 UUID
 * format"; MD5 is only the standard's way to spread the name here, nothing relies on it resisting
 * collisions made on purpose (every name is made of our own ids).
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
 * Items cut into runs of at most `size`, in the order of their delivery ids. Cutting a sorted list
 * keeps every batch but the last full, so when some batches are sent again without the others
 * (those went through and were recorded), cutting what is left makes those same batches, and
 * each keeps its key.
 */
export function batches<T extends { deliveryId: string }>(items: readonly T[], size: number): T[][] {
  const sorted = [...items].sort((a, b) => (a.deliveryId < b.deliveryId ? -1 : a.deliveryId > b.deliveryId ? 1 : 0));
  const runs: T[][] = [];
  for (let at = 0; at < sorted.length; at += size) runs.push(sorted.slice(at, at + size));
  return runs;
}
