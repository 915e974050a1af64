import { randomUUID } from 'node:crypto';
import { generateVAPIDKeys } from 'web-push';
import { parseAllowedOrigins } from '@operator/config';
import { FakePushService, pushRequest } from '@operator/testing';
import type { PushProvider, SendTarget } from '@operator/providers';
import { createWebPushProvider, type WebPushProviderOptions } from './index';

// Connections to one push service: at most connectionsPerOrigin (PUSH_PROVIDER_CONNECTIONS), one
// request on each, counted by a local push service over TLS that holds its answers for a while.

describe('web push provider: connections per push service origin', () => {
  const vapid = generateVAPIDKeys();
  let fake: FakePushService;
  let provider: PushProvider;

  const make = (options: Partial<WebPushProviderOptions>) => {
    const allowed = parseAllowedOrigins(fake.origin);
    if (!allowed.ok) throw new Error(allowed.problems.join('; '));
    provider = createWebPushProvider({ vapid: { ...vapid, subject: 'mailto:ops@example.test' }, ca: fake.ca, allowedOrigins: allowed.origins, ...options });
    return provider;
  };
  /** `count` subscriptions whose next push is answered 201 after `delayMs`. */
  const targets = (count: number, delayMs: number): SendTarget[] =>
    Array.from({ length: count }, () => {
      const id = randomUUID();
      const subscription = fake.subscription(id);
      fake.respond(id, { status: 201, delayMs });
      return { deliveryId: randomUUID(), token: subscription.endpoint, platform: 'web', p256dh: subscription.keys.p256dh, auth: subscription.keys.auth };
    });
  const push = () => ({ pushId: randomUUID(), request: pushRequest(4242, 'player-7') });

  beforeEach(async () => {
    fake = await FakePushService.start({ vapidPublicKey: vapid.publicKey });
  });
  afterEach(async () => {
    await provider.close();
    await fake.close();
  });

  it('keeps at most connectionsPerOrigin requests and connections to one origin', async () => {
    const results = await make({ connectionsPerOrigin: 3, concurrency: 16 }).send(push(), targets(30, 150));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.received).toHaveLength(30);
    expect(fake.peakInFlight).toBe(3);
    expect(fake.peakConnections).toBeLessThanOrEqual(3);
    expect(fake.tlsConnections).toBeLessThanOrEqual(3);
  });

  it('starts a send’s deadline once a connection is free: sends queued behind slow answers are not timed out', async () => {
    // 12 sends on 2 connections take six rounds of 200 ms, each send well within its own 500 ms.
    const started = Date.now();
    const results = await make({ connectionsPerOrigin: 2, concurrency: 16, timeoutMs: 500 }).send(push(), targets(12, 200));
    expect(results.filter((result) => !result.ok)).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1100);
    expect(fake.peakInFlight).toBe(2);
  });
});
