import type { ComplianceSettings } from '@operator/config';
import { createComplianceGate, type ComplianceGateHandle } from './create';
import { playerKey, type Player, type Verdict } from './gate';
import { OPTED_IN, startSpecServer, type SpecServer } from './spec-server';

let server: SpecServer;
let gate: ComplianceGateHandle | undefined;
let clock = 1_000_000;

function settings(overrides: Partial<ComplianceSettings> = {}): ComplianceSettings {
  return {
    default: { url: server.url },
    brands: new Map(),
    blockTypes: ['blocked'],
    consentDefault: 'opted-out',
    cacheTtlMs: 60_000,
    maxWaitMs: 3_600_000,
    concurrency: 64,
    timeoutMs: 2000,
    ...overrides,
  };
}

function open(overrides: Partial<ComplianceSettings> = {}): ComplianceGateHandle {
  gate = createComplianceGate(settings(overrides), { now: () => clock });
  return gate;
}

const player = (userId: string, brandId = '1'): Player => ({ brandId, userId });

async function verdictOf(userId: string, brandId = '1', of = gate!): Promise<Verdict | undefined> {
  return (await of.check([player(userId, brandId)])).get(playerKey(player(userId, brandId)));
}

beforeEach(async () => {
  server = await startSpecServer();
  clock = 1_000_000;
});
afterEach(async () => {
  await gate?.close();
  gate = undefined;
  await server.close();
});

describe('createComplianceGate: the verdict', () => {
  it.each([
    ['an active Excluded block', { blocks: [{ active: true, type: 'Excluded' }], consents: OPTED_IN }, { kind: 'suppressed', reason: 'excluded' }],
    ['Excluded with Blocked', { blocks: [{ active: true, type: 'Blocked' }, { active: true, type: 'Excluded' }], consents: OPTED_IN }, { kind: 'suppressed', reason: 'excluded' }],
    ['an active Blocked block', { blocks: [{ active: true, type: 'Blocked' }], consents: OPTED_IN }, { kind: 'suppressed', reason: 'blocked' }],
    ['a COMPLIANCE_BLOCK_TYPES block', { blocks: [{ active: true, type: 'CoolOff' }], consents: OPTED_IN }, { kind: 'suppressed', reason: 'blocked' }],
    ['a block without `active`', { blocks: [{ type: 'Excluded' }], consents: OPTED_IN }, { kind: 'suppressed', reason: 'excluded' }],
    ['inactive blocks and consent', { blocks: [{ active: false, type: 'Excluded' }, { active: false, type: 'Blocked' }], consents: OPTED_IN }, { kind: 'allowed' }],
    ['a block of another type', { blocks: [{ active: true, type: 'Marketing' }], consents: OPTED_IN }, { kind: 'allowed' }],
    ['push opted out', { consents: [{ type: 'email', opted_in: true }, { type: 'pushNotification', opted_in: false }] }, { kind: 'suppressed', reason: 'no-consent' }],
    ['no push consent entry', { consents: [{ type: 'email', opted_in: true }] }, { kind: 'suppressed', reason: 'no-consent' }],
  ] as const)('%s', async (_what, records, expected) => {
    server.records.set('p1', records as never);
    open({ blockTypes: ['blocked', 'cooloff'] });
    expect(await verdictOf('p1')).toEqual(expected);
    expect(server.requests.map((request) => request.path).sort()).toEqual(['/userblocks/p1', '/userconsents/p1']);
  });

  it('lets COMPLIANCE_CONSENT_DEFAULT=opted-in send to a player without a push consent entry, never to one opted out', async () => {
    server.records.set('none', { consents: [] });
    server.records.set('out', { consents: [{ type: 'pushNotification', opted_in: false }] });
    open({ consentDefault: 'opted-in' });
    expect(await verdictOf('none')).toEqual({ kind: 'allowed' });
    expect(await verdictOf('out')).toEqual({ kind: 'suppressed', reason: 'no-consent' });
  });

  it('takes 404 as no records: an unknown player has no consent, unless the default says opted-in', async () => {
    open();
    expect(await verdictOf('unknown')).toEqual({ kind: 'suppressed', reason: 'no-consent' });
    await gate!.close();
    open({ consentDefault: 'opted-in' });
    expect(await verdictOf('unknown-2')).toEqual({ kind: 'allowed' });
    server.records.set('blocked-only', { blocks: [{ active: true, type: 'Blocked' }] });
    server.answers.set('/userconsents/blocked-only', { status: 404 });
    expect(await verdictOf('blocked-only')).toEqual({ kind: 'suppressed', reason: 'blocked' });
  });

  it('asks for the user id URL-encoded', async () => {
    server.records.set('a/b c?d', { consents: OPTED_IN });
    open();
    expect(await verdictOf('a/b c?d')).toEqual({ kind: 'allowed' });
    expect(server.requests.map((request) => request.path).sort()).toEqual(['/userblocks/a%2Fb%20c%3Fd', '/userconsents/a%2Fb%20c%3Fd']);
  });
});

describe('createComplianceGate: no usable answer', () => {
  it.each([
    ['503', { status: 503 }, 'userblocks: status 503'],
    ['429', { status: 429 }, 'userblocks: status 429'],
    ['another 4xx', { status: 403 }, 'userblocks: status 403'],
    ['not JSON', { status: 200, body: '<html>oops' }, 'userblocks: answer is not JSON'],
    ['JSON without the list', { status: 200, body: '{"blocks":"none"}' }, 'userblocks: answer has no list of blocks'],
    ['no answer in time', 'hang', 'userblocks: timeout'],
    // Followed, the redirect would land on an answer that allows the player.
    ['a redirect, not followed', { status: 302, headers: { location: '/userconsents/p1' } }, 'userblocks: status 302'],
    ['an answer past the size cap', { status: 200, body: `{"blocks":[${'{"active":false,"type":"Blocked","note":""},'.repeat(7000)}{}]}` }, 'userblocks: answer larger than 262144 bytes'],
  ] as const)('%s is unverified, not cached', async (_what, answer, error) => {
    server.records.set('p1', { consents: OPTED_IN });
    server.answers.set('/userblocks/p1', answer);
    open({ timeoutMs: 200 });
    expect(await verdictOf('p1')).toEqual({ kind: 'unverified', error });
    server.answers.clear();
    expect(await verdictOf('p1')).toEqual({ kind: 'allowed' });
    expect(server.count('/userblocks/p1')).toBe(2);
  });

  it('is unverified when the consents fail and no block decides, suppressed when one does', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    server.records.set('p2', { blocks: [{ active: true, type: 'Excluded' }] });
    server.answers.set('/userconsents/p1', { status: 500 });
    server.answers.set('/userconsents/p2', { status: 500 });
    open();
    expect(await verdictOf('p1')).toEqual({ kind: 'unverified', error: 'userconsents: status 500' });
    expect(await verdictOf('p2')).toEqual({ kind: 'suppressed', reason: 'excluded' });
  });

  it('is unverified when nothing listens', async () => {
    open({ default: { url: 'http://127.0.0.1:1' } });
    expect(await verdictOf('p1')).toMatchObject({ kind: 'unverified', error: expect.stringMatching(/^userblocks: /) });
  });
});

describe('createComplianceGate: the cache', () => {
  it('answers a second check without a request, until the TTL has passed', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    open({ cacheTtlMs: 60_000 });
    expect(await verdictOf('p1')).toEqual({ kind: 'allowed' });
    server.records.set('p1', { blocks: [{ active: true, type: 'Excluded' }] });
    clock += 59_999;
    expect(await verdictOf('p1')).toEqual({ kind: 'allowed' });
    expect(server.requests).toHaveLength(2);
    clock += 1;
    expect(await verdictOf('p1')).toEqual({ kind: 'suppressed', reason: 'excluded' });
    expect(server.requests).toHaveLength(4);
  });

  it('drops the expired answers of players never asked about again, once a TTL has passed', async () => {
    for (const userId of ['p1', 'p2', 'p3']) server.records.set(userId, { consents: OPTED_IN });
    open({ cacheTtlMs: 60_000 });
    await verdictOf('p1');
    await verdictOf('p2');
    expect(gate!.cachedPlayers()).toBe(2);
    clock += 60_000;
    // The next answer written sweeps the expired ones: only p3 is held.
    await verdictOf('p3');
    expect(gate!.cachedPlayers()).toBe(1);
  });

  it('caches per brand: the same user id of another brand is asked again', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    open();
    await verdictOf('p1', '1');
    await verdictOf('p1', '2');
    expect(server.count('/userblocks/p1')).toBe(2);
  });

  it('caches nothing with a TTL of 0', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    open({ cacheTtlMs: 0 });
    await verdictOf('p1');
    await verdictOf('p1');
    expect(server.count('/userblocks/p1')).toBe(2);
  });
});

describe('createComplianceGate: lookups', () => {
  it('looks a player up once for concurrent checks and repeated entries', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    server.delayMs = 50;
    open();
    const checks = await Promise.all(Array.from({ length: 5 }, () => gate!.check([player('p1'), player('p1'), player('p1')])));
    for (const verdicts of checks) expect([...verdicts]).toEqual([['1/p1', { kind: 'allowed' }]]);
    expect(server.count('/userblocks/p1')).toBe(1);
    expect(server.count('/userconsents/p1')).toBe(1);
  });

  it('looks up at most COMPLIANCE_CONCURRENCY players at once (two requests each)', async () => {
    const players = Array.from({ length: 20 }, (_, index) => player(`c${index}`));
    for (const { userId } of players) server.records.set(userId, { consents: OPTED_IN });
    server.delayMs = 40;
    open({ concurrency: 3 });
    const verdicts = await gate!.check(players);
    expect(verdicts.size).toBe(20);
    expect([...verdicts.values()].every((verdict) => verdict.kind === 'allowed')).toBe(true);
    expect(server.requests).toHaveLength(40);
    expect(server.maxInFlight).toBe(6);
  });

  it("does not ask for a brand the settings give no endpoint, and asks each brand's own with its credential", async () => {
    const brandServer = await startSpecServer('/brand-4/api');
    try {
      server.records.set('p1', { consents: OPTED_IN });
      brandServer.records.set('p1', { blocks: [{ active: true, type: 'Blocked' }] });
      gate = createComplianceGate(
        settings({
          default: { url: server.url, credential: { kind: 'api-key', header: 'X-Operator-Key', key: 'default-key' } },
          brands: new Map([['4', { url: brandServer.url, credential: { kind: 'basic', username: 'crm-4', password: 'pa:ss' } }]]),
        }),
      );
      expect(await verdictOf('p1', '1')).toEqual({ kind: 'allowed' });
      expect(await verdictOf('p1', '4')).toEqual({ kind: 'suppressed', reason: 'blocked' });
      for (const request of server.requests) {
        expect(request.headers['x-operator-key']).toBe('default-key');
        expect(request.headers.authorization).toBeUndefined();
      }
      expect(brandServer.requests.map((request) => request.path).sort()).toEqual(['/userblocks/p1', '/userconsents/p1']);
      for (const request of brandServer.requests) {
        expect(request.headers.authorization).toBe(`Basic ${Buffer.from('crm-4:pa:ss').toString('base64')}`);
        expect(request.headers['x-operator-key']).toBeUndefined();
      }
      await gate.close();
      gate = createComplianceGate(settings({ default: undefined, brands: new Map([['4', { url: brandServer.url }]]) }));
      expect(await verdictOf('p1', '7')).toEqual({ kind: 'allowed' });
      expect(brandServer.requests).toHaveLength(2);
    } finally {
      await brandServer.close();
    }
  });
});

describe('createComplianceGate: forget', () => {
  it("drops a player's answers of every brand, and no other's", async () => {
    server.records.set('p1', { consents: OPTED_IN });
    server.records.set('p2', { consents: OPTED_IN });
    open();
    await gate!.check([player('p1', '1'), player('p1', '2'), player('p2')]);
    server.records.set('p1', { blocks: [{ active: true, type: 'Excluded' }] });
    gate!.forget(['p1']);
    const verdicts = await gate!.check([player('p1', '1'), player('p1', '2'), player('p2')]);
    expect(verdicts.get('1/p1')).toEqual({ kind: 'suppressed', reason: 'excluded' });
    expect(verdicts.get('2/p1')).toEqual({ kind: 'suppressed', reason: 'excluded' });
    expect(verdicts.get('1/p2')).toEqual({ kind: 'allowed' });
    expect(server.count('/userblocks/p1')).toBe(4);
    expect(server.count('/userblocks/p2')).toBe(1);
  });

  it('keeps a fetch that started before forget() from filling the cache with its answer', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    server.delayMs = 100;
    open();
    const stale = gate!.check([player('p1')]);
    await server.arrived(2);
    // The player self-excludes while the answer is on its way; the announcement comes before it lands.
    server.records.set('p1', { blocks: [{ active: true, type: 'Excluded' }] });
    gate!.forget(['p1']);
    expect((await stale).get('1/p1')).toEqual({ kind: 'allowed' });
    // Its answer predates the change: the next check asks again, and keeps the new answer.
    expect(await verdictOf('p1')).toEqual({ kind: 'suppressed', reason: 'excluded' });
    expect(await verdictOf('p1')).toEqual({ kind: 'suppressed', reason: 'excluded' });
    expect(server.count('/userblocks/p1')).toBe(2);
  });

  it('starts a new lookup for a check made after forget(), not joining the one under way', async () => {
    server.records.set('p1', { consents: OPTED_IN });
    server.delayMs = 100;
    open();
    const stale = gate!.check([player('p1')]);
    await server.arrived(2);
    server.records.set('p1', { consents: [{ type: 'pushNotification', opted_in: false }] });
    gate!.forget(['p1']);
    const fresh = gate!.check([player('p1')]);
    expect((await stale).get('1/p1')).toEqual({ kind: 'allowed' });
    expect((await fresh).get('1/p1')).toEqual({ kind: 'suppressed', reason: 'no-consent' });
    expect(server.count('/userconsents/p1')).toBe(2);
  });
});
