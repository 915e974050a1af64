import { randomUUID } from 'node:crypto';
import { apnsToken, FakeApns, pushRequest, testTls, uniqueName } from '@operator/testing';
import type { PushProvider, SendTarget } from '@operator/providers';
import { createApnsProvider, type ApnsProviderOptions } from './index';

// How many sends the APNs client keeps on the wire, counted by a local APNs that holds every answer
// for a while: as many as it allows on each connection, over as many connections as the client may
// open, and never more.

const target = (token = apnsToken()): SendTarget => ({ deliveryId: uniqueName('delivery'), token, platform: 'ios', p256dh: null, auth: null });
const push = () => ({ pushId: randomUUID(), request: pushRequest(7, 'player-1') });

describe('APNs provider: sends in flight follow the connections APNs allows', () => {
  let fake: FakeApns;
  const providers: PushProvider[] = [];
  const provider = (overrides: Partial<ApnsProviderOptions> = {}) => {
    const made = createApnsProvider({
      key: fake.key,
      keyId: fake.keyId,
      teamId: fake.teamId,
      topic: 'com.example.casino',
      production: false,
      host: fake.host,
      port: fake.port,
      ca: testTls().ca,
      ...overrides,
    });
    providers.push(made);
    return made;
  };

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((made) => made.close()));
    await fake.close();
  });

  it('fills each connection to the streams APNs announces, opens up to the cap, and goes no further', async () => {
    fake = await FakeApns.start({ maxConcurrentStreams: 50, answerDelayMs: 300 });
    const apns = provider({ maxConnections: 3 });
    // Connected, its SETTINGS known.
    expect((await apns.send(push(), [target()]))[0].ok).toBe(true);
    fake.resetPeaks();
    const results = await apns.send(push(), Array.from({ length: 400 }, () => target()));
    expect(results.filter((result) => !result.ok).slice(0, 2)).toEqual([]);
    expect(fake.peakStreamsPerSession).toBe(50);
    expect(fake.peakBusySessions).toBe(3);
    expect(fake.peakInFlight).toBe(150);
    expect(fake.sessions).toBe(3);
  });

  it('keeps more than 160 sends in flight by default when APNs allows them', async () => {
    fake = await FakeApns.start({ maxConcurrentStreams: 100, answerDelayMs: 300 });
    const apns = provider();
    const results = await apns.send(push(), Array.from({ length: 600 }, () => target()));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.peakInFlight).toBeGreaterThan(160);
    expect(fake.peakInFlight).toBeLessThanOrEqual(400);
    expect(fake.peakStreamsPerSession).toBeLessThanOrEqual(100);
    expect(fake.sessions).toBeLessThanOrEqual(4);
  });

  it('sends the same provider token on every connection', async () => {
    fake = await FakeApns.start({ maxConcurrentStreams: 100, answerDelayMs: 200 });
    const apns = provider({ maxConnections: 3 });
    await apns.send(push(), [target()]);
    await apns.send(push(), Array.from({ length: 300 }, () => target()));
    expect(fake.sessions).toBe(3);
    expect(new Set(fake.requests.map((request) => request.authorization)).size).toBe(1);
    expect(new Set(fake.requests.map((request) => request.session)).size).toBe(3);
  });

  it('caps the sends below what the connections take when PUSH_PROVIDER_CONCURRENCY is set', async () => {
    fake = await FakeApns.start({ maxConcurrentStreams: 100, answerDelayMs: 200 });
    const apns = provider({ concurrency: 25 });
    const results = await apns.send(push(), Array.from({ length: 120 }, () => target()));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.peakInFlight).toBe(25);
  });
});
