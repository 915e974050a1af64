import { v7 as uuidv7 } from 'uuid';
import { playerKey, type ComplianceGate, type Player, type Verdict } from '@operator/compliance';
import { pushEventRows, readDeliveries, readPushFeed, registerDevice } from '@operator/db';
import { pushEventBody } from '@operator/contract';
import { metricsText } from '@operator/metrics';
import type { PushProvider, SendTarget } from '@operator/providers';
import { feedTop, pushRequest, uniqueName, until } from '@operator/testing';
import { acceptMessages } from './accept';
import { createSendRecorder, type SendRecorder } from './outcomes';
import { processSendJob, UNVERIFIED_WAIT_MS, unverifiedWaitMs, type SendDeps } from './send';
import { specSendDeps } from './test/send-deps';
import { silent, WebPushFixture } from './test/web-push-fixture';

/** A gate whose verdicts the test sets, counting each check() and the players it was asked about. */
class ScriptedGate implements ComplianceGate {
  verdicts = new Map<string, Verdict>();
  checks: Player[][] = [];
  set(player: Player, verdict: Verdict) {
    this.verdicts.set(playerKey(player), verdict);
  }
  async check(players: readonly Player[]) {
    this.checks.push([...players]);
    return new Map(players.map((player) => [playerKey(player), this.verdicts.get(playerKey(player)) ?? ({ kind: 'allowed' } as Verdict)]));
  }
  forget() {}
  async close() {}
}

/** A provider client that records every target it is asked to send to, and accepts them all. */
function recordingProvider(name: 'fcm' | 'webpush') {
  const targets: SendTarget[] = [];
  const provider: PushProvider = {
    name,
    async send(_notification, sent) {
      targets.push(...sent);
      return sent.map((target) => ({ ok: true, providerMessageId: `m-${target.deliveryId}` }));
    },
    async close() {},
  };
  return { provider, targets };
}

describe('the compliance gate at send time (PostgreSQL, Redis, a Web Push service over TLS)', () => {
  const t = new WebPushFixture('test-compliance');
  let recorder: SendRecorder;
  let gate: ScriptedGate;

  beforeAll(() => t.open());
  afterAll(() => t.close());
  beforeEach(() => {
    t.begin();
    gate = new ScriptedGate();
    recorder = createSendRecorder({ db: t.db, log: silent, leaseMs: 60000 });
  });
  afterEach(async () => {
    await recorder.close();
    await t.end();
  });

  const deps = (overrides: Partial<SendDeps> = {}): SendDeps =>
    specSendDeps({
      db: t.db,
      provider: 'webpush',
      providerFor: () => t.provider,
      recorder,
      compliance: { gate, maxWaitMs: 3_600_000 },
      brandLabel: (brandId) => (brandId === String(t.brand) ? brandId : 'other'),
      ...overrides,
    });
  const job = (pushIds: string[], attempt = 1, maxAttempts = 4) => ({ pushIds, attempt, maxAttempts, enqueuedAt: Date.now() });
  const player = (userId = t.player): Player => ({ brandId: String(t.brand), userId });
  const message = (pushId: string) => t.db.message.findFirstOrThrow({ where: { id: pushId } });
  const eventsOf = async (pushId: string) => {
    const { rows } = await t.db.pool.query<{ id: string }>(`SELECT id FROM events WHERE push_id = $1 ORDER BY feed_seq`, [pushId]);
    return pushEventRows(t.db.pool, rows.map((row) => row.id));
  };
  const sample = async (line: string) => {
    const found = (await metricsText()).split('\n').find((candidate) => candidate.startsWith(`${line} `));
    return found === undefined ? 0 : Number(found.slice(line.length + 1));
  };
  /** Pushes to `userId` with the CRM's meta, accepted as the gateway does. */
  const acceptTo = async (userId: string, count: number, meta: string) => {
    const requests = Array.from({ length: count }, () => pushRequest(t.brand, userId));
    const outcomes = await acceptMessages(
      { db: t.db, redis: t.producer, queues: t.queues, jobMaxMessages: 100, sendPolicy: { attempts: 4, backoffMs: 50 } },
      requests,
      {},
      requests.map(() => meta),
    );
    return outcomes.map((outcome) => {
      if (outcome.kind !== 'accepted') throw new Error(`push not accepted: ${outcome.kind}`);
      return outcome.pushId;
    });
  };

  it('fails a suppressed player\'s pushes with the reason, reported with meta; sends nothing to them, keeps the devices active', async () => {
    const a = await t.device();
    const b = await t.device();
    const excluded = t.player;
    const allowedPlayer = uniqueName('player');
    t.player = allowedPlayer;
    const c = await t.device();
    t.player = excluded;
    gate.set(player(excluded), { kind: 'suppressed', reason: 'excluded' });
    const line = `operator_push_suppressions_total{provider="webpush",reason="excluded",brand="${t.brand}"}`;
    const before = await sample(line);

    // The feed from here on: read from its start, it holds every earlier suite's events first.
    const feedEnd = await feedTop(t.db.pool);
    const suppressedIds = await acceptTo(excluded, 2, '{"campaign":"spring","n":1}');
    const [allowedId] = await acceptTo(allowedPlayer, 1, '{"campaign":"spring","n":2}');
    const outcome = await processSendJob(deps(), job([...suppressedIds, allowedId]));

    expect(outcome).toEqual({ kind: 'done', sent: 1, failed: 4, dropped: 0 });
    // Each player asked about once in the job, whatever its pushes and devices.
    expect(gate.checks.flat().map((p) => p.userId).sort()).toEqual([excluded, allowedPlayer].sort());
    expect(t.fake.receivedFor(a.id)).toHaveLength(0);
    expect(t.fake.receivedFor(b.id)).toHaveLength(0);
    expect(t.fake.receivedFor(c.id)).toHaveLength(1);
    for (const pushId of suppressedIds) {
      expect(await message(pushId)).toMatchObject({ status: 'failed', error: 'suppressed:excluded' });
      const rows = await readDeliveries(t.db.pool, [pushId]);
      expect(rows.map((row) => row.errorCode)).toEqual(['suppressed:excluded', 'suppressed:excluded']);
      const events = await eventsOf(pushId);
      expect(events).toHaveLength(1);
      expect(JSON.parse(pushEventBody(events[0]))).toMatchObject({ push_id: pushId, status: 'failed', error: 'suppressed:excluded', meta: { campaign: 'spring', n: 1 } });
    }
    // The feed the CRM polls carries the same event, with its meta. The feed shows an event once
    // every transaction older than its own ended, and other suites' transactions run meanwhile.
    const polled = await until(async () => {
      const feed = await readPushFeed(t.db.pool, feedEnd, 10_000, [String(t.brand)]);
      const rows = feed.rows.filter((row) => suppressedIds.includes(row.pushId));
      return rows.length === suppressedIds.length && rows;
    }, 'the feed to show both events');
    expect(polled.map((row) => [row.status, row.error, row.meta && JSON.parse(row.meta).campaign])).toEqual(suppressedIds.map(() => ['failed', 'suppressed:excluded', 'spring']));
    const devices = await t.db.device.findMany({ where: { id: { in: [a.deviceId, b.deviceId] } } });
    expect(devices.map((device) => device.active)).toEqual([true, true]);
    expect((await sample(line)) - before).toBe(2);
  });

  it('settles a push of two providers failed once, with the reason, when both gates suppress it', async () => {
    const web = await t.device();
    await registerDevice(t.db, uuidv7(), { brandId: BigInt(t.brand), userId: t.player, provider: 'fcm', platform: 'android', token: uniqueName('fcm-token'), p256dh: null, auth: null });
    gate.set(player(), { kind: 'suppressed', reason: 'no-consent' });
    const fcm = recordingProvider('fcm');
    const [pushId] = await acceptTo(t.player, 1, '{"k":"v"}');

    expect(await processSendJob(deps(), job([pushId]))).toMatchObject({ kind: 'done', sent: 0, failed: 1 });
    expect(await message(pushId)).toMatchObject({ status: 'accepted' });
    expect(await processSendJob(deps({ provider: 'fcm', providerFor: () => fcm.provider }), job([pushId]))).toMatchObject({ kind: 'done', sent: 0, failed: 1 });

    expect(fcm.targets).toHaveLength(0);
    expect(t.fake.receivedFor(web.id)).toHaveLength(0);
    expect(await message(pushId)).toMatchObject({ status: 'failed', error: 'suppressed:no-consent' });
    const events = await eventsOf(pushId);
    expect(events.map((event) => [event.status, event.error, event.meta])).toEqual([['failed', 'suppressed:no-consent', '{"k":"v"}']]);
  });

  it('names the suppression alone as the error when another device of the push was inactive', async () => {
    const gone = await t.device();
    await t.device();
    gate.set(player(), { kind: 'suppressed', reason: 'blocked' });
    const [pushId] = await acceptTo(t.player, 1, '{}');
    await t.db.device.update({ where: { id: gone.deviceId }, data: { active: false } });
    await processSendJob(deps(), job([pushId]));
    expect(await message(pushId)).toMatchObject({ status: 'failed', error: 'suppressed:blocked' });
  });

  it('makes an unverified player\'s pushes wait with a back-off that uses no attempt, then fails them suppressed:unverified past COMPLIANCE_MAX_WAIT', async () => {
    const phone = await t.device();
    gate.set(player(), { kind: 'unverified', error: 'HTTP 503' });
    const pushIds = await acceptTo(t.player, 3, '{"m":1}');

    // The last attempt too: a wait is not a retry, and nothing is sent unchecked.
    for (const attempt of [1, 4]) {
      const outcome = await processSendJob(deps(), job(pushIds, attempt, 4));
      expect(outcome).toMatchObject({ kind: 'wait' });
      if (outcome.kind !== 'wait') throw new Error('not a wait');
      expect(outcome.delayMs).toBeGreaterThanOrEqual(UNVERIFIED_WAIT_MS.min);
      expect(outcome.delayMs).toBeLessThanOrEqual(UNVERIFIED_WAIT_MS.max);
    }
    expect(t.fake.receivedFor(phone.id)).toHaveLength(0);
    expect((await readDeliveries(t.db.pool, pushIds)).every((row) => row.status === 'pending')).toBe(true);
    expect(gate.checks).toHaveLength(2);
    expect(gate.checks.every((players) => players.length === 1)).toBe(true);

    // The endpoint answers again: the same pushes go out once each.
    gate.set(player(), { kind: 'allowed' });
    expect(await processSendJob(deps(), job(pushIds, 1))).toEqual({ kind: 'done', sent: 3, failed: 0, dropped: 0 });
    expect(t.fake.receivedFor(phone.id)).toHaveLength(3);

    // Other pushes, older than COMPLIANCE_MAX_WAIT (a wait of 1 ms) while the endpoint is down: failed, never sent.
    gate.set(player(), { kind: 'unverified', error: 'timeout' });
    const late = await acceptTo(t.player, 2, '{"m":2}');
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await processSendJob(deps({ compliance: { gate, maxWaitMs: 1 } }), job(late))).toEqual({ kind: 'done', sent: 0, failed: 2, dropped: 0 });
    expect(t.fake.receivedFor(phone.id)).toHaveLength(3);
    for (const pushId of late) {
      const [event] = await eventsOf(pushId);
      expect(JSON.parse(pushEventBody(event))).toMatchObject({ status: 'failed', error: 'suppressed:unverified', meta: { m: 2 } });
    }
    expect((await t.db.device.findUniqueOrThrow({ where: { id: phone.deviceId } })).active).toBe(true);
  });

  it('waits longer the longer a push has waited, within bounds', async () => {
    expect([0, 20_000, 120_000, 3_600_000].map(unverifiedWaitMs)).toEqual([1000, 2000, 12000, 60000]);
  });
});
