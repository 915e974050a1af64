import { randomUUID } from 'node:crypto';
import type { PushRequest } from '@operator/contract';
import { FakeOneSignal, pushRequest } from '@operator/testing';
import type { Notification, PushProvider, SendResult, SendTarget } from '@operator/providers';
import { createOneSignalProvider, type OneSignalProviderOptions } from '../index';

/** A device: a new delivery to a OneSignal subscription (a new one unless given). */
export function target(subscriptionId: string = randomUUID(), platform: SendTarget['platform'] = 'android'): SendTarget {
  return { deliveryId: randomUUID(), token: subscriptionId, platform, p256dh: null, auth: null };
}

export function notification(overrides: Partial<PushRequest> = {}): Notification {
  return { pushId: randomUUID(), request: pushRequest(4242, 'player-7', overrides), trackingToken: `tt-${randomUUID()}` };
}

export const failure = (result: SendResult) => (result.ok ? null : result.error);

/**
 * What the OneSignal specs share, set up by its own hooks: a local OneSignal API for the suite
 * (forgetting its requests after each test), and providers to it, closed after each test.
 */
export function oneSignalSuite(): { fake: () => FakeOneSignal; provider: (options?: Partial<OneSignalProviderOptions>) => PushProvider } {
  let fake: FakeOneSignal;
  const providers: PushProvider[] = [];
  beforeAll(async () => {
    fake = await FakeOneSignal.start();
  });
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((created) => created.close()));
    fake.reset();
  });
  afterAll(async () => {
    await fake.close();
  });
  return {
    fake: () => fake,
    provider(options = {}) {
      const created = createOneSignalProvider({ appId: fake.appId, restApiKey: fake.restApiKey, endpoint: fake.origin, ca: fake.ca, ...options });
      providers.push(created);
      return created;
    },
  };
}
