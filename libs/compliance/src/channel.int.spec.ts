import { randomUUID } from 'node:crypto';
import { redisUrlConnection } from '@operator/config';
import { createProducerRedis, publish } from '@operator/queue';
import { until } from '@operator/testing';
import { createComplianceGate, type ComplianceGateHandle } from './create';
import { COMPLIANCE_CHANNEL, type Player } from './gate';
import { OPTED_IN, startSpecServer, type SpecServer } from './spec-server';

// COMPLIANCE_CHANNEL over the test Redis. The channel is server-wide: user ids are unique per run,
// so announcements of other runs never name them.
const connection = redisUrlConnection(process.env.REDIS_URL!);
const redis = createProducerRedis(connection);
const run = randomUUID().slice(0, 8);
const player = (name: string): Player => ({ brandId: '1', userId: `${name}-${run}` });

let server: SpecServer;
let gate: ComplianceGateHandle;

beforeEach(async () => {
  server = await startSpecServer();
  gate = createComplianceGate(
    { default: { url: server.url }, brands: new Map(), blockTypes: ['blocked'], consentDefault: 'opted-out', cacheTtlMs: 60_000, maxWaitMs: 3_600_000, concurrency: 8, timeoutMs: 2000 },
    { redis: connection },
  );
  await gate.ready;
});
afterEach(async () => {
  await gate.close();
  await server.close();
});
afterAll(() => redis.quit());

const kindOf = async (of: Player) => (await gate.check([of])).get(`${of.brandId}/${of.userId}`)?.kind;
const requestsFor = (of: Player) => server.count(`/userblocks/${of.userId}`);

describe('the gate on COMPLIANCE_CHANNEL', () => {
  it('forgets the players a message names, in every brand, and no other', async () => {
    const [p1, p2] = [player('p1'), player('p2')];
    for (const { userId } of [p1, p2]) server.records.set(userId, { consents: OPTED_IN });
    await gate.check([p1, p2, { brandId: '2', userId: p1.userId }]);
    expect(server.requests).toHaveLength(6);
    server.records.set(p1.userId, { blocks: [{ active: true, type: 'Excluded' }] });
    expect(await kindOf(p1)).toBe('allowed');

    await publish(redis, COMPLIANCE_CHANNEL, JSON.stringify([p1.userId]));
    await until(async () => (await kindOf(p1)) === 'suppressed', 'the announced player asked again');
    expect((await gate.check([{ brandId: '2', userId: p1.userId }])).get(`2/${p1.userId}`)).toEqual({ kind: 'suppressed', reason: 'excluded' });
    expect(await kindOf(p2)).toBe('allowed');
    expect(requestsFor(p2)).toBe(1);
  });

  it('keeps a lookup under way when the message came from caching its stale answer', async () => {
    const [p1, witness] = [player('p1'), player('witness')];
    server.records.set(p1.userId, { consents: OPTED_IN });
    server.records.set(witness.userId, { consents: OPTED_IN });
    await gate.check([witness]);
    server.delayMs = 300;
    const stale = gate.check([p1]);
    await server.arrived(4);
    server.delayMs = 0;
    server.records.set(p1.userId, { blocks: [{ active: true, type: 'Excluded' }] });
    await publish(redis, COMPLIANCE_CHANNEL, JSON.stringify([p1.userId, witness.userId]));
    // The witness asked again: the message was handled, while p1's lookup was still under way.
    await until(async () => (await gate.check([witness])) && requestsFor(witness) === 2, 'the message handled');
    expect(server.inFlight).toBe(2);
    expect((await stale).get(`1/${p1.userId}`)).toEqual({ kind: 'allowed' });
    expect(await kindOf(p1)).toBe('suppressed');
    expect(requestsFor(p1)).toBe(2);
  });

  it('drops every answer when its subscription is made again (messages may have been lost meanwhile)', async () => {
    const p1 = player('p1');
    server.records.set(p1.userId, { consents: OPTED_IN });
    await kindOf(p1);
    const list = String(await redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
    const ids = [...list.matchAll(/(?:^|\n)id=(\d+)[^\n]*\bname=(\S+)/g)].filter((match) => match[2] === `operator-compliance-${process.pid}`).map((match) => match[1]);
    expect(ids).toHaveLength(1);
    await redis.call('CLIENT', 'KILL', 'ID', ids[0]);
    await until(async () => (await kindOf(p1)) && requestsFor(p1) === 2, 'the answer asked again');
  });
});
