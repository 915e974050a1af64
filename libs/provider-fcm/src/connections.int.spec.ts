import { randomUUID } from 'node:crypto';
import { FakeFcm, fcmToken, pushRequest } from '@operator/testing';
import type { PushProvider, SendTarget } from '@operator/providers';
import { createFcmProvider, type FcmProviderOptions } from './index';

// How many sends the FCM client keeps on the wire, counted by a local FCM that holds every answer
// for a while: as many as the server allows on each connection (its SETTINGS_MAX_CONCURRENT_STREAMS),
// over as many connections as the client may open, and never more.

const target = (): SendTarget => ({ deliveryId: randomUUID(), token: fcmToken(), platform: 'android', p256dh: null, auth: null });
const notification = () => ({ pushId: randomUUID(), request: pushRequest(4242, 'player-7') });

describe('FCM provider: sends in flight follow the connections FCM allows', () => {
  let fake: FakeFcm;
  const providers: PushProvider[] = [];

  const providerFor = (options: Partial<FcmProviderOptions> = {}) => {
    const created = createFcmProvider({ serviceAccount: fake.serviceAccount, httpAgent: fake.agent, ...options });
    providers.push(created);
    return created;
  };

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((provider) => provider.close()));
    await fake.close();
  });

  it('fills every connection to the streams the server announces, opens up to the cap, and goes no further', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 40, answerDelayMs: 300, holdUntilInFlight: 120 });
    const provider = providerFor({ maxConnections: 3 });
    const results = await provider.send(notification(), Array.from({ length: 400 }, target));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.delivered).toHaveLength(400);
    // 3 connections x 40 streams, and not one more on any connection nor any further connection.
    expect(fake.peakStreamsPerConnection).toBe(40);
    expect(fake.peakBusyConnections).toBe(3);
    expect(fake.peakInFlight).toBe(120);
    expect(fake.sessions).toBe(3);
  });

  it('keeps FCM’s 100 streams busy on each of its 8 default connections: far more than 160 sends in flight', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 100, answerDelayMs: 400, holdUntilInFlight: 800 });
    const provider = providerFor();
    const results = await provider.send(notification(), Array.from({ length: 1000 }, target));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.peakStreamsPerConnection).toBe(100);
    expect(fake.peakBusyConnections).toBe(8);
    expect(fake.peakInFlight).toBe(800);
    expect(fake.sessions).toBe(8);
  });

  it('opens a further connection only when the open ones are full', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 100, answerDelayMs: 100 });
    const provider = providerFor({ maxConnections: 8 });
    await provider.send(notification(), Array.from({ length: 150 }, target));
    expect(fake.sessions).toBe(2);
    // Kept: the next sends go on the connections already open.
    await provider.send(notification(), Array.from({ length: 150 }, target));
    expect(fake.sessions).toBe(2);
  });

  it('waits for a stream before its deadline starts: sends queued behind slow answers are not timed out', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 10, answerDelayMs: 250 });
    // 60 sends on 10 streams take six rounds of 250 ms, each send well within its own 1000 ms.
    const provider = providerFor({ maxConnections: 1, timeoutMs: 1000 });
    // The connection is open and its SETTINGS known (before them 100 streams are assumed, as nghttp2 does).
    expect((await provider.send(notification(), [target()]))[0].ok).toBe(true);
    fake.resetPeaks();
    const started = Date.now();
    const results = await provider.send(notification(), Array.from({ length: 60 }, target));
    expect({ peak: fake.peakInFlight, failed: results.filter((result) => !result.ok), ms: Date.now() - started }).toEqual({ peak: 10, failed: [], ms: expect.any(Number) });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  });

  it('caps the sends below what the connections take when PUSH_PROVIDER_CONCURRENCY is set', async () => {
    fake = await FakeFcm.start({ maxConcurrentStreams: 100, answerDelayMs: 200 });
    const provider = providerFor({ concurrency: 30 });
    const results = await provider.send(notification(), Array.from({ length: 200 }, target));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(fake.peakInFlight).toBe(30);
    expect(fake.sessions).toBe(1);
  });
});
