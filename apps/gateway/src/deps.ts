import type { GatewayConfig } from '@operator/config';
import type { Db, Reads } from '@operator/db';
import type { PushQueues, RedisClient } from '@operator/queue';

/** What the gateway's servers are built from: its config and the clients main.ts opens. */
export interface GatewayDeps {
  config: GatewayConfig;
  db: Db;
  /** Where the reads that may lag go (DATABASE_READ_URL); the primary's pool when absent. */
  reads?: Reads;
  redis: RedisClient;
  queues: PushQueues;
}
