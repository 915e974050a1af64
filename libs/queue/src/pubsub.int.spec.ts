import { randomUUID } from 'node:crypto';
import { redisUrlConnection } from '@operator/config';
import { until } from '@operator/testing';
import { publish, subscribe } from './pubsub';
import { createProducerRedis } from './redis';

// Pub/sub over the test Redis: channels are server-wide, so each test has a channel of its own.
const connection = redisUrlConnection(process.env.REDIS_URL!);
const redis = createProducerRedis(connection);
afterAll(() => redis.quit());

/** Kills the connection named `name` (a subscription's), as a network cut or a failover would. */
async function kill(name: string): Promise<void> {
  const list = String(await redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  const id = /(?:^|\n)id=(\d+)[^\n]*\bname=(\S+)/g;
  for (const match of list.matchAll(id)) if (match[2] === name) await redis.call('CLIENT', 'KILL', 'ID', match[1]);
}

describe('publish and subscribe', () => {
  it('delivers what is published to the subscriber of that channel, and nothing of another', async () => {
    const channel = `spec:pubsub:${randomUUID()}`;
    const heard: string[] = [];
    const subscription = subscribe(connection, channel, (message) => heard.push(message));
    await subscription.ready;
    expect(await publish(redis, `${channel}:other`, 'elsewhere')).toBe(0);
    expect(await publish(redis, channel, '["p1","p2"]')).toBe(1);
    await until(() => heard.length === 1, 'the message');
    expect(heard).toEqual(['["p1","p2"]']);
    await subscription.close();
    expect(await publish(redis, channel, 'after')).toBe(0);
  });

  it('tells of every (re)subscription, and hears messages again after a reconnection', async () => {
    const channel = `spec:pubsub:${randomUUID()}`;
    const name = `spec-pubsub-${randomUUID().slice(0, 8)}`;
    const heard: string[] = [];
    let subscriptions = 0;
    const subscription = subscribe(connection, channel, (message) => heard.push(message), { connectionName: name, onSubscribed: () => (subscriptions += 1) });
    await subscription.ready;
    expect(subscriptions).toBe(1);
    await kill(name);
    await until(() => subscriptions === 2, 'the subscription made again');
    await until(async () => (await publish(redis, channel, 'back')) === 1, 'the subscriber back on the channel');
    await until(() => heard.includes('back'), 'the message after the reconnection');
    await subscription.close();
  });
});
