import type { ProviderName } from '@operator/contract';
import { Queue, type JobsOptions } from 'bullmq';
import { PROVIDER_NAMES } from '@operator/provider-registry';
import { pushQueueName, queueKeyPrefix, SEND_PUSH_JOB, sendPushJobId, type SendPushJob } from './jobs';
import { redisErrorListener, type RedisClient } from './redis';

export type PushQueues = Record<ProviderName, Queue<SendPushJob>>;

export interface SendJobPolicy {
  attempts: number;
  backoffMs: number;
}

export const DEFAULT_SEND_JOB_POLICY: SendJobPolicy = { attempts: 8, backoffMs: 1000 };

/** The workers compute this backoff (exponential, jittered, honouring the provider's Retry-After). */
export const SEND_BACKOFF_TYPE = 'provider';

/** The producer's queues on one connection; their errors are reported with the connection's (see redisErrorListener). */
export function createPushQueues(connection: RedisClient, prefix: string): PushQueues {
  const onError = redisErrorListener(connection);
  const make = (provider: ProviderName) =>
    new Queue<SendPushJob>(pushQueueName(provider), { connection, prefix: queueKeyPrefix(prefix, pushQueueName(provider)) }).on('error', onError);
  return Object.fromEntries(PROVIDER_NAMES.map((provider) => [provider, make(provider)]));
}

export interface SendJobRequest {
  provider: ProviderName;
  pushIds: string[];
  /** Another round of the same pushes (the reconciler's): a new job id, since the first job may still be kept as completed or failed. */
  round?: string;
}

function jobOptions({ pushIds, round }: SendJobRequest, policy: SendJobPolicy): JobsOptions {
  return {
    jobId: sendPushJobId(pushIds, round),
    attempts: policy.attempts,
    backoff: { type: SEND_BACKOFF_TYPE, delay: policy.backoffMs },
    removeOnComplete: { age: 3600, count: 10000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/**
 * Adds the send jobs, each queue's in one round trip: a lone job by itself, several in one
 * pipeline (addBulk), which costs the producer about as much again as the job for one. A job that
 * fails fails the call, and the caller's transaction rolls back: a job added beside it names pushes
 * never committed, which the worker drops.
 */
export async function enqueueSendJobs(queues: PushQueues, requests: SendJobRequest[], policy: SendJobPolicy = DEFAULT_SEND_JOB_POLICY): Promise<void> {
  const byProvider = new Map<ProviderName, SendJobRequest[]>();
  for (const request of requests) {
    const list = byProvider.get(request.provider);
    if (list) list.push(request);
    else byProvider.set(request.provider, [request]);
  }
  await Promise.all(
    [...byProvider].map(([provider, list]) =>
      list.length === 1
        ? queues[provider].add(SEND_PUSH_JOB, { pushIds: list[0].pushIds }, jobOptions(list[0], policy))
        : queues[provider].addBulk(list.map((request) => ({ name: SEND_PUSH_JOB, data: { pushIds: request.pushIds }, opts: jobOptions(request, policy) }))),
    ),
  );
}

export async function closePushQueues(queues: PushQueues): Promise<void> {
  await Promise.all(Object.values(queues).map((queue) => queue.close()));
}

export interface QueueJobCounts {
  queue: string;
  /** Ready to run (waiting or prioritized), also while the queue is paused. */
  waiting: number;
  active: number;
  /** Waiting for their backoff to pass. */
  delayed: number;
  /** Out of attempts, kept for a week. */
  failed: number;
}

/** How many jobs each queue holds by state: one script per queue, whatever their length. */
export async function queueJobCounts(queues: Queue[]): Promise<QueueJobCounts[]> {
  return Promise.all(
    queues.map(async (queue) => {
      const counts = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
      return {
        queue: queue.name,
        waiting: counts.waiting + counts.prioritized,
        active: counts.active,
        delayed: counts.delayed,
        failed: counts.failed,
      };
    }),
  );
}
