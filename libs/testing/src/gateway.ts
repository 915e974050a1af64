import { loadGatewayConfig, type GatewayConfig } from '@operator/config';
import { closeDb, closeReads, createDb, createReads, type Db, type Reads } from '@operator/db';
import { closePushQueues, createProducerRedis, createPushQueues, type PushQueues, type RedisClient, type RedisOptions } from '@operator/queue';
import { uniqueName } from './ids';

export const OPERATOR_KEY = 'test-operator-key';
export const ROTATED_OPERATOR_KEY = 'test-operator-key-next';
/** INTERNAL_API_KEYS: opens every internal route. */
export const INTERNAL_KEY = 'test-internal-key';
/** INTERNAL_DEVICE_KEYS: the device routes only. */
export const DEVICE_KEY = 'test-device-key';
/** INTERNAL_ADMIN_KEYS: every internal route. */
export const ADMIN_KEY = 'test-admin-key';

export interface TestStores {
  config: GatewayConfig;
  db: Db;
  /** The reads of DATABASE_READ_URL (the primary's pool unless the test names a replica). */
  reads: Reads;
  redis: RedisClient;
  queues: PushQueues;
  close(): Promise<void>;
}

/** Gateway dependencies on the test database and Redis, with a queue prefix of their own. */
export async function openTestStores(env: Record<string, string> = {}, redisOptions: RedisOptions = {}): Promise<TestStores> {
  const config = loadGatewayConfig({
    ...process.env,
    OPERATOR_API_KEYS: `${OPERATOR_KEY},${ROTATED_OPERATOR_KEY}`,
    INTERNAL_API_KEYS: INTERNAL_KEY,
    INTERNAL_DEVICE_KEYS: DEVICE_KEY,
    INTERNAL_ADMIN_KEYS: ADMIN_KEY,
    QUEUE_PREFIX: uniqueName('test'),
    MAX_EVENT_LOOP_DELAY_MS: '0',
    // Specs answer many 401s from one address; those of the throttle set their own limit.
    AUTH_FAILURE_LIMIT: '0',
    MAX_HEAP_USED_BYTES: '0',
    ...env,
  });
  const db = createDb({ url: config.DATABASE_URL, poolSize: 5 });
  const reads = createReads(db, { url: config.DATABASE_READ_URL, primaryUrl: config.DATABASE_URL, poolSize: 3 });
  const redis = createProducerRedis(config.redis, redisOptions);
  redis.on('error', () => undefined);
  await new Promise<void>((resolve) => (redis.status === 'ready' ? resolve() : redis.once('ready', () => resolve())));
  const queues = createPushQueues(redis, config.QUEUE_PREFIX);
  return {
    config,
    db,
    reads,
    redis,
    queues,
    async close() {
      await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
      await closePushQueues(queues).catch(() => undefined);
      redis.disconnect();
      await closeReads(reads);
      await closeDb(db);
    },
  };
}
