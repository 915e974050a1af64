import type { RedisClient } from './redis';

/**
 * Publishes `message` on a Redis channel, for every process subscribed to it (a Cluster forwards it
 * to every node). Answers how many subscribers the server handed it to.
 */
export function publish(redis: RedisClient, channel: string, message: string): Promise<number> {
  return redis.publish(channel, message);
}
