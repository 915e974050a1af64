import type { LogSink, RedisConnection } from '@operator/config';
import { createWorkerRedis, type RedisClient } from './redis';

// Redis pub/sub for announcements every process must hear at once (a player's compliance answer
// dropped). Delivery is at most once: a subscriber told of a (re)subscription must assume it missed
// messages while it was away.

/** Publishes `message` on `channel` over a connection of the caller's; the number of subscribers that got it. */
export async function publish(redis: RedisClient, channel: string, message: string): Promise<number> {
  return Number(await redis.publish(channel, message));
}

export interface SubscribeOptions {
  /** Each time the subscription is (re)established: messages sent meanwhile were lost. */
  onSubscribed?: () => void;
  /** The connection's name in CLIENT LIST. */
  connectionName?: string;
  log?: LogSink;
}

export interface Subscription {
  /** Settles once subscribed the first time; waits while Redis is away. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * Subscribes to `channel` on a connection of its own (a subscribed connection can do nothing else),
 * with a single Redis, Sentinel or Cluster alike, resubscribing after every reconnection.
 */
export function subscribe(connection: RedisConnection, channel: string, onMessage: (message: string) => void, options: SubscribeOptions = {}): Subscription {
  const redis = createWorkerRedis(connection, options.connectionName ? { connectionName: options.connectionName } : {}, options.log);
  let subscribed = false;
  let closed = false;
  const listener = (from: string, message: string) => {
    if (from === channel && !closed) onMessage(message);
  };
  redis.on('message', listener);
  // ioredis subscribes again by itself after a reconnection, as soon as the connection is ready.
  redis.on('ready', () => {
    if (subscribed && !closed) options.onSubscribed?.();
  });
  const ready = redis.subscribe(channel).then(() => {
    subscribed = true;
    if (!closed) options.onSubscribed?.();
  });
  return {
    ready,
    async close() {
      closed = true;
      redis.off('message', listener);
      // QUIT is answered once the server has dropped the subscription; while Redis is away it is not sent at all.
      if (redis.status === 'ready') {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([redis.quit().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, 1000)))]);
        clearTimeout(timer);
      }
      redis.disconnect();
      await ready.catch(() => undefined);
    },
  };
}
