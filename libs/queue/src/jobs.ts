import { Type, type Static } from '@sinclair/typebox';
import { UUID_PATTERN, type ProviderName } from '@operator/contract';
import { PROVIDER_NAMES } from '@operator/provider-registry';

// Queue names and job payloads are a wire contract between the gateway and the workers: they are
// written once, here. Payloads carry ids, never message content or credentials.

export type PushQueueName = `push-${ProviderName}`;

/** A provider's queue: `push-<name>`. */
export function pushQueueName(provider: ProviderName): PushQueueName {
  return `push-${provider}`;
}

/** Every registered provider's queue, by provider. */
export const PUSH_QUEUES: Readonly<Record<ProviderName, PushQueueName>> = Object.fromEntries(PROVIDER_NAMES.map((name) => [name, pushQueueName(name)]));

export const SEND_PUSH_JOB = 'send';

/**
 * The BullMQ prefix of one queue's keys: `{<QUEUE_PREFIX>:<queue>}`. The braces are a Redis Cluster
 * hash tag, so every key of a queue (which its scripts and MULTIs touch together) is in one slot,
 * and each queue has its own, so queues spread over the shards. One key layout in every mode:
 * `{operator:push-fcm}:push-fcm:wait` is the FCM queue's waiting list.
 */
export function queueKeyPrefix(prefix: string, queue: PushQueueName): string {
  return `{${prefix}:${queue}}`;
}

/** A key of a queue, as BullMQ names it (`wait`, `active`, `meta`, ...). */
export function queueKey(prefix: string, queue: PushQueueName, key: string): string {
  return `${queueKeyPrefix(prefix, queue)}:${queue}:${key}`;
}

/**
 * Send the given pushes to the provider's devices that have a pending delivery. The job is added
 * inside the gateway's database transaction, just before commit: a worker that does not see the
 * messages yet must retry, and one that never sees them (the transaction rolled back) drops the job.
 */
export const SendPushJobSchema = Type.Object({
  pushIds: Type.Array(Type.String({ pattern: UUID_PATTERN }), { minItems: 1 }),
});
export type SendPushJob = Static<typeof SendPushJobSchema>;

/** The job id derives from the pushes it carries (and the round), so adding the same job twice is a no-op. */
export function sendPushJobId(pushIds: string[], round?: string): string {
  const id = pushIds.length === 1 ? `push-${pushIds[0]}` : `push-${pushIds[0]}-n${pushIds.length}`;
  return round ? `${id}-r${round}` : id;
}
