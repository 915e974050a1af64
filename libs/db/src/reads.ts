import type { LogSink } from '@operator/config';
import { closeDb, createDb, isConnectionFailure, pingDb, type Db } from './client';

/**
 * Where the reads that may lag a little go (DATABASE_READ_URL): status polling, the events feed,
 * device and catalog listings, the back office's reads, the store gauges. Writes, and the reads a
 * write depends on (the idempotency checks at acceptance, a credit's catalog bonus, claims), use
 * the primary's pool and never come here.
 */
export interface Reads {
  /** The primary: what a miss on the replica is asked again (a push accepted a moment ago). */
  readonly primary: Db;
  /** The replica's pool; the primary's when the reads have no server of their own. */
  readonly replica: Db;
  /** Whether the reads have a server of their own. */
  readonly separate: boolean;
  /**
   * Runs `work` on the replica; on the primary while the replica cannot be reached, so that a
   * replica down costs the reads nothing but the primary's capacity, and never the writes.
   */
  run<T>(work: (db: Db) => Promise<T>): Promise<T>;
}

export interface ReadsOptions {
  /** DATABASE_READ_URL, already defaulted to DATABASE_URL. */
  url: string;
  /** DATABASE_URL: when `url` is the same, the reads share the primary's pool. */
  primaryUrl: string;
  poolSize?: number;
  connectTimeoutMs?: number;
  /** How long the reads stay on the primary after the replica could not be reached. */
  retryMs?: number;
  /** What a log line may show of the replica (urlOrigin: never its password). */
  label?: string | null;
  log?: LogSink;
}

/** The reads of a process with no replica: all on the primary's pool. */
export function primaryReads(primary: Db): Reads {
  return { primary, replica: primary, separate: false, run: (work) => work(primary) };
}

/**
 * The replica's pool is made as the primary's (createDb): no startup parameters, no session state,
 * so it works through PgBouncer in transaction mode in front of the replicas too.
 */
export function createReads(primary: Db, { url, primaryUrl, poolSize, connectTimeoutMs, retryMs = 5000, label, log }: ReadsOptions): Reads {
  if (url === primaryUrl) return primaryReads(primary);
  const replica = createDb({ url, poolSize, connectTimeoutMs, log, store: 'postgres-read' });
  let downUntil = 0;
  return {
    primary,
    replica,
    separate: true,
    async run(work) {
      if (Date.now() < downUntil) return work(primary);
      try {
        const result = await work(replica);
        if (downUntil) log?.info({ store: 'postgres-read', replica: label }, 'PostgreSQL replica answers again; reads go back to it');
        downUntil = 0;
        return result;
      } catch (error) {
        if (!isConnectionFailure(error)) throw error;
        if (!downUntil) {
          log?.warn({ store: 'postgres-read', replica: label, err: (error as Error).message, retryMs }, 'PostgreSQL replica unreachable; reading from the primary');
        }
        downUntil = Date.now() + retryMs;
        return work(primary);
      }
    },
  };
}

/**
 * One row by its id, from the replica; one it does not have yet is asked of the primary, so that a
 * row written a moment ago (a push just accepted, a credit just recorded) is never answered 404.
 */
export async function readOrPrimary<T>(reads: Reads, work: (db: Db) => Promise<T | undefined>): Promise<T | undefined> {
  const found = await reads.run(work);
  return found !== undefined || !reads.separate ? found : work(reads.primary);
}

/** Resolves when the replica answers (the primary's pool when the reads have none). */
export function pingReads(reads: Reads): Promise<void> {
  return pingDb(reads.replica);
}

/** Closes the replica's pool; the primary's is its owner's to close. */
export async function closeReads(reads: Reads): Promise<void> {
  if (reads.separate) await closeDb(reads.replica);
}
