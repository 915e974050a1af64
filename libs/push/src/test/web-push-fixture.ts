import { v7 as uuidv7 } from 'uuid';
import { closeDb, createDb, registerDevice, type Db } from '@operator/db';
import type { PushProvider } from '@operator/providers';
import { createWebPushProvider } from '@operator/provider-webpush';
import { closePushQueues, createProducerRedis, createPushQueues, type PushQueues, type RedisClient, type SendJobPolicy } from '@operator/queue';
import { FakePushService, pushRequest, testTls, uniqueBrandId, uniqueName, vapidKeys, type FakePushAnswer } from '@operator/testing';
import type { PushRequest } from '@operator/contract';
import { parseAllowedOrigins, redisUrlConnection, type AllowedOrigin } from '@operator/config';
import { acceptMessages } from '../accept';

export const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * What the send tests share: the test database, queues of their own on the test Redis, a Web Push
 * service over TLS with a provider client for it, and a new player for each test. `open` and
 * `close` go in beforeAll/afterAll, `begin` and `end` in beforeEach/afterEach.
 */
export class WebPushFixture {
  db!: Db;
  producer!: RedisClient;
  fake!: FakePushService;
  /** WEBPUSH_ALLOWED_ORIGINS of the fixture's provider: the fake's origin. */
  allowedOrigins: AllowedOrigin[] = [];
  provider!: PushProvider;
  queues!: PushQueues;
  prefix!: string;
  brand!: number;
  player!: string;
  readonly vapid = { ...vapidKeys(), subject: 'mailto:ops@example.test' };

  constructor(private readonly name: string) {}

  async open() {
    this.db = createDb({ url: process.env.DATABASE_URL!, poolSize: 6 });
    this.producer = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
    await new Promise((resolve) => this.producer.once('ready', resolve));
    this.fake = await FakePushService.start();
    const allowed = parseAllowedOrigins(this.fake.origin);
    if (!allowed.ok) throw new Error(allowed.problems.join('; '));
    this.allowedOrigins = allowed.origins;
    this.provider = createWebPushProvider({ vapid: this.vapid, ca: testTls().ca, allowedOrigins: allowed.origins, timeoutMs: 3000 });
  }

  async close() {
    await this.provider.close();
    await this.fake.close();
    this.producer.disconnect();
    await closeDb(this.db);
  }

  begin() {
    this.prefix = uniqueName(this.name);
    this.queues = createPushQueues(this.producer, this.prefix);
    this.brand = uniqueBrandId();
    this.player = uniqueName('player');
  }

  async end() {
    await Promise.all(Object.values(this.queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(this.queues);
  }

  /** A device of the player, subscribed at the fake push service, answering as scripted. */
  async device(...answers: FakePushAnswer[]) {
    const id = uniqueName('sub');
    const subscription = this.fake.subscription(id);
    if (answers.length) this.fake.respond(id, ...answers);
    const { device: row } = await registerDevice(this.db, uuidv7(), {
      brandId: BigInt(this.brand),
      userId: this.player,
      provider: 'webpush',
      platform: 'web',
      token: subscription.endpoint,
      p256dh: subscription.keys.p256dh,
      auth: subscription.keys.auth,
    });
    return { id, deviceId: row.id };
  }

  /** Accepts `count` pushes to the player, as the gateway does; answers their push ids. */
  async accept(count = 1, policy: SendJobPolicy = { attempts: 4, backoffMs: 50 }, overrides: Partial<PushRequest> = {}) {
    const requests = Array.from({ length: count }, () => pushRequest(this.brand, this.player, overrides));
    const deps = { db: this.db, redis: this.producer, queues: this.queues, jobMaxMessages: Math.max(100, count), sendPolicy: policy };
    const outcomes = await acceptMessages(deps, requests, {});
    return outcomes.map((outcome) => {
      if (outcome.kind !== 'accepted') throw new Error(`push not accepted: ${outcome.kind}`);
      return outcome.pushId;
    });
  }
}
