import { compileChecker, type ProviderName } from '@operator/contract';
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import { backoffMs, type LogSink } from '@operator/config';
import { PUSH_QUEUES, queueKeyPrefix, SendPushJobSchema, type SendPushJob } from './jobs';
import { SEND_BACKOFF_TYPE } from './push-queues';
import type { RedisClient } from './redis';

/** The queue's view of what a send job asks for next (see SendJobOutcome in @operator/push). */
export type SendJobVerdict =
  | { kind: 'done' }
  | { kind: 'retry'; reason: string; delayMs: number }
  | { kind: 'wait'; reason: string; delayMs: number };

export interface SendJobRun {
  pushIds: string[];
  attempt: number;
  maxAttempts: number;
  enqueuedAt: number;
}

export interface SendWorkerOptions {
  connection: RedisClient;
  prefix: string;
  concurrency: number;
  backoffMs: number;
  /** The worker renews the lock while alive; past it another worker may take the job over. */
  lockDurationMs?: number;
  /** Where a malformed job is reported. */
  log?: LogSink;
}

const checkSendPushJob = compileChecker(SendPushJobSchema);

/** Thrown to make BullMQ retry the job; carries the provider's Retry-After for the backoff. */
export class RetryLater extends Error {
  constructor(
    message: string,
    readonly minDelayMs: number,
  ) {
    super(message);
  }
}

/**
 * A BullMQ worker for one provider's queue: `handle`'s verdict becomes a retry with backoff or a
 * delay that uses no attempt. Nothing pauses the queue: a 429 is about one device or credential.
 */
export function createSendWorker(provider: ProviderName, handle: (run: SendJobRun) => Promise<SendJobVerdict>, options: SendWorkerOptions) {
  return new Worker<SendPushJob>(
    PUSH_QUEUES[provider],
    async (job: Job<SendPushJob>, token?: string) => {
      // Whatever the payload, another attempt reads the same one: a malformed job fails for good.
      const checked = checkSendPushJob(job.data);
      if (!checked.ok) {
        options.log?.error({ jobId: job.id, queue: job.queueName, problem: checked.error }, 'malformed send job refused; failed without retry');
        throw new UnrecoverableError(`malformed send job ${job.id}: ${checked.error}`);
      }
      const verdict = await handle({
        pushIds: checked.value.pushIds,
        attempt: job.attemptsMade + 1,
        maxAttempts: job.opts.attempts ?? 1,
        enqueuedAt: job.timestamp,
      });
      switch (verdict.kind) {
        case 'done':
          return verdict;
        case 'wait':
          await job.moveToDelayed(Date.now() + verdict.delayMs, token);
          throw new DelayedError(verdict.reason);
        case 'retry':
          throw new RetryLater(verdict.reason, verdict.delayMs);
      }
    },
    {
      connection: options.connection,
      prefix: queueKeyPrefix(options.prefix, PUSH_QUEUES[provider]),
      concurrency: options.concurrency,
      lockDuration: options.lockDurationMs ?? 30000,
      settings: {
        backoffStrategy: (attemptsMade: number, type?: string, error?: Error) => {
          if (type !== SEND_BACKOFF_TYPE) return 0;
          return backoffMs(attemptsMade, options.backoffMs, undefined, error instanceof RetryLater ? error.minDelayMs : 0);
        },
      },
    },
  );
}
