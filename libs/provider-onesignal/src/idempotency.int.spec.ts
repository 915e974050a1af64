import { oneSignalAnswers, type FakeOneSignal } from '@operator/testing';
import { failure, notification, oneSignalSuite, target } from './test/fixture';

// A push is never delivered twice to a subscription, whatever happens to the answers: every send of
// the same deliveries carries the same idempotency_key, from any worker, and OneSignal answers a
// repeat from its record of the first request.

describe('OneSignal provider: idempotent sends', () => {
  const suite = oneSignalSuite();
  const provider = suite.provider;
  let fake: FakeOneSignal;
  beforeAll(() => {
    fake = suite.fake();
  });

  it('takes a lost answer as transient; sending the same deliveries again delivers nothing twice and comes back sent', async () => {
    const push = notification();
    const targets = [target(), target(), target()];
    const client = provider();
    fake.script(oneSignalAnswers.lostAnswer());

    const first = await client.send(push, targets);

    // OneSignal made the notification and delivered it; only the answer was lost.
    expect(fake.delivered).toHaveLength(3);
    for (const result of first) expect(failure(result)).toMatchObject({ class: 'transient', code: 'network' });

    const again = await client.send(push, [...targets].reverse());

    const [made, repeat] = fake.requests;
    expect(repeat.idempotencyKey).toBe(made.idempotencyKey);
    expect(repeat.reason).toBe('idempotent repeat');
    expect(fake.idempotentRepeats).toBe(1);
    expect(again).toEqual(targets.map(() => ({ ok: true, providerMessageId: made.notificationId })));
    expect(fake.delivered).toHaveLength(3);
    expect(fake.duplicates()).toBe(0);
  });

  it('sends the same key from another worker taking the deliveries over, and the repeat keeps the first answer', async () => {
    const push = notification();
    const targets = [target(), target(), target()];
    fake.invalidate(targets[2].token);
    fake.script(oneSignalAnswers.lostAnswer());

    // The first worker is killed (here: its answer never comes) before it records anything.
    await provider().send(push, targets);
    // A second worker, a provider of its own, claims the same deliveries.
    const takenOver = await provider().send({ ...push }, targets.map((t) => ({ ...t })));

    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1].idempotencyKey).toBe(fake.requests[0].idempotencyKey);
    expect(fake.requests[1].connection).not.toBe(fake.requests[0].connection);
    expect(takenOver[0]).toEqual({ ok: true, providerMessageId: fake.requests[0].notificationId });
    expect(takenOver[1]).toEqual({ ok: true, providerMessageId: fake.requests[0].notificationId });
    expect(failure(takenOver[2])).toMatchObject({ class: 'dead-token', code: 'unregistered' });
    expect(fake.delivered).toHaveLength(2);
    expect(fake.duplicates()).toBe(0);
  });

  it('delivers once when a 429 or a 5xx comes first and the same deliveries are sent again', async () => {
    const push = notification();
    const targets = [target(), target()];
    const client = provider();
    fake.script(oneSignalAnswers.rateLimited(1), oneSignalAnswers.serverError(500));

    const limited = await client.send(push, targets);
    const broken = await client.send(push, targets);
    const sent = await client.send(push, targets);
    const repeated = await client.send(push, targets);

    expect(failure(limited[0])).toMatchObject({ code: 'rate-limited' });
    expect(failure(broken[0])).toMatchObject({ code: 'unavailable' });
    expect(sent.every((result) => result.ok)).toBe(true);
    expect(repeated).toEqual(sent);
    expect(new Set(fake.requests.map((r) => r.idempotencyKey)).size).toBe(1);
    expect(fake.delivered).toHaveLength(2);
    expect(fake.duplicates()).toBe(0);
  });

  it('keeps a batch that went through out of the re-run, and re-sends the failed batch under its own key', async () => {
    const push = notification();
    const targets = Array.from({ length: 4 }, () => target());
    const client = provider({ maxSubscriptionsPerRequest: 2, concurrency: 1 });
    fake.script(oneSignalAnswers.lostAnswer());

    const first = await client.send(push, targets);
    const lost = targets.filter((_, index) => !first[index].ok);
    expect(lost).toHaveLength(2);
    const lostKey = fake.requests[0].idempotencyKey;

    // What a re-run claims: the deliveries not recorded as sent.
    const again = await client.send(push, lost);

    expect(fake.requests[2].idempotencyKey).toBe(lostKey);
    expect(again.every((result) => result.ok)).toBe(true);
    expect(fake.delivered).toHaveLength(4);
    expect(fake.duplicates()).toBe(0);
  });
});
