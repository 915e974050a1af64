import { v7 as uuidv7 } from 'uuid';
import type { PushRequest } from '@operator/contract';
import {
  closeDb,
  createDb,
  inTransaction,
  listDeadLetters,
  redriveDeadLetters,
  registerDevice,
  type Db,
} from '@operator/db';
import { createSandboxProvider, type PushProvider } from '@operator/providers';
import {
  acceptMessages,
  createSendRecorder,
  processSendJob,
  recordEngagement,
  STATUS_RANK,
  type EngagementType,
  type SendRecorder,
} from '@operator/push';
import { closePushQueues, createProducerRedis, createPushQueues, type PushQueues, type RedisClient } from '@operator/queue';
import { FakeCrm, pushRequest, startConnectProxy, TcpProxy, uniqueBrandId, uniqueName, until, webPushSubscription, type CrmRequest } from '@operator/testing';
import { redisUrlConnection } from '@operator/config';
import { createDispatcher, type Dispatcher, type DispatcherOptions } from './dispatcher';
import { verifySignature } from './signature';

// The dispatcher against a local CRM receiver, over the test database. Events come from the real
// paths (accept, send with the sandbox provider, engagement reports). The outbox is shared with
// other tests, so every assertion looks only at this test's pushes, and the receiver's script
// (failures, refusals, delays) applies only to them: other events are answered 200 at once.

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
const SECRET = 'whsec-test-secret';
/** `meta` as a CRM might write it: spaces, 1.0, a number past 2^53, an escape. It must come back byte for byte. */
const ODD_META = '{ "campaign" : "spring",  "n": 1.0, "big": 12345678901234567890, "u": "\\u00e9" }';
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


interface EventRow {
  id: string;
  pushId: string;
  status: string;
  error: string | null;
  occurredAt: Date;
  state: 'pending' | 'delivered' | 'dead';
  attempts: number;
  lastError: string | null;
}

interface Push {
  pushId: string;
  request: PushRequest;
}

const pushIdOf = (request: CrmRequest): string | undefined => request.json?.push_id;

describe('webhook dispatcher (PostgreSQL, a CRM receiver over HTTP)', () => {
  let db: Db;
  let producer: RedisClient;
  let queues: PushQueues;
  let crm: FakeCrm;
  const sandbox = createSandboxProvider('webpush');
  let brand: number;
  let player: string;
  /** This test's push ids: the receiver's script applies to their events only. */
  let mine: Set<string>;
  const running: Dispatcher[] = [];
  let recorder: SendRecorder;

  beforeAll(async () => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 8 });
    recorder = createSendRecorder({ db, log: silent, leaseMs: 60000 });
    producer = createProducerRedis(redisUrlConnection(process.env.REDIS_URL!));
    await new Promise((resolve) => producer.once('ready', resolve));
    crm = await FakeCrm.start();
  });
  afterAll(async () => {
    await recorder.close();
    await crm.close();
    producer.disconnect();
    await closeDb(db);
  });

  beforeEach(() => {
    queues = createPushQueues(producer, uniqueName('test-webhooks'));
    brand = uniqueBrandId();
    player = uniqueName('player');
    mine = new Set();
    crm.reset().only((request) => mine.has(pushIdOf(request) ?? ''));
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((dispatcher) => dispatcher.stop()));
    await crm.up();
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(queues);
  });

  const options = (overrides: Partial<DispatcherOptions> = {}): DispatcherOptions => ({
    db,
    log: silent,
    urls: { 'push.status': crm.url('/webhooks/push-status') },
    secret: SECRET,
    auth: {},
    timeoutMs: 300,
    concurrency: 4,
    batchSize: 50,
    leaseMs: 500,
    maxAgeMs: 3_600_000,
    backoffMs: 20,
    maxBackoffMs: 200,
    idleMs: 20,
    ...overrides,
  });

  function start(overrides: Partial<DispatcherOptions> = {}): Dispatcher {
    const dispatcher = createDispatcher(options(overrides));
    running.push(dispatcher);
    dispatcher.start();
    return dispatcher;
  }

  async function device(user = player) {
    const subscription = webPushSubscription();
    const { device: row } = await registerDevice(db, uuidv7(), {
      brandId: BigInt(brand),
      userId: user,
      provider: 'webpush',
      platform: 'web',
      token: subscription.endpoint,
      p256dh: subscription.keys.p256dh,
      auth: subscription.keys.auth,
    });
    return row.id;
  }

  /** Accepts pushes through the gateway's store path, with `rawMeta` as the CRM's meta text (null: no meta). */
  async function accept(count = 1, rawMeta: string | null = ODD_META, user = player): Promise<Push[]> {
    const requests = Array.from({ length: count }, () =>
      pushRequest(brand, user, { meta: rawMeta === null ? undefined : (JSON.parse(rawMeta) as Record<string, unknown>) }),
    );
    const outcomes = await acceptMessages(
      { db, redis: producer, queues, jobMaxMessages: 100, sendPolicy: { attempts: 4, backoffMs: 50 } },
      requests,
      {},
      requests.map(() => rawMeta ?? undefined),
    );
    return outcomes.map((outcome, i) => {
      if (outcome.kind !== 'accepted') throw new Error(`push not accepted: ${outcome.kind}`);
      mine.add(outcome.pushId);
      return { pushId: outcome.pushId, request: requests[i] };
    });
  }

  /** Runs the send job as the worker would (sandbox: every device accepts), which writes `sent` / `failed`. */
  const send = (pushes: Push[], provider: PushProvider = sandbox) =>
    processSendJob(
      {
        db,
        provider: 'webpush',
        providerFor: () => provider,
        log: silent,
        recorder,
        leaseMs: 60000,
        visibilityGraceMs: 30000,
        parallelMessages: 4,
        trackingSecret: 'test-tracking-secret',
        retryAfterMaxMs: 300000,
      },
      { pushIds: pushes.map((p) => p.pushId), attempt: 1, maxAttempts: 4, enqueuedAt: Date.now() },
    );

  const engage = (push: Push, type: EngagementType) => inTransaction(db, (sql) => recordEngagement(sql, push.pushId, type));

  async function eventRows(pushes: Push[]): Promise<EventRow[]> {
    const { rows } = await db.pool.query<EventRow>(
      `SELECT e.id, e.push_id AS "pushId", e.status, e.error, e.occurred_at AS "occurredAt", d.state, d.attempts, d.last_error AS "lastError"
         FROM events e JOIN event_dispatch d ON d.id = e.id WHERE e.push_id = ANY($1::uuid[]) ORDER BY e.seq`,
      [pushes.map((p) => p.pushId)],
    );
    return rows;
  }

  /** Waits until no event of these pushes is pending any more. */
  const settled = (pushes: Push[], ms = 5000) =>
    until(async () => {
      const rows = await eventRows(pushes);
      return rows.length > 0 && rows.every((row) => row.state !== 'pending') && rows;
    }, 'the events to be dispatched', ms);

  const of = (pushes: Push[]) => {
    const ids = new Set(pushes.map((p) => p.pushId));
    return (request: CrmRequest) => ids.has(pushIdOf(request) ?? '');
  };
  const receivedFor = (pushes: Push[]) => crm.received.filter(of(pushes));
  const acceptedFor = (pushes: Push[]) => crm.accepted.filter(of(pushes));

  /** Every request of a push carries a status at least as far along as the one before. */
  function expectInOrder(requests: CrmRequest[]) {
    const byPush = new Map<string, string[]>();
    for (const request of requests) byPush.set(request.json.push_id, [...(byPush.get(request.json.push_id) ?? []), request.json.status]);
    for (const statuses of byPush.values()) {
      const ranks = statuses.map((status) => STATUS_RANK[status]);
      expect(ranks).toEqual([...ranks].sort((a, b) => a - b));
    }
  }

  /** Each event accepted exactly once; the accepted ids are exactly the events of these pushes. */
  function expectEachOnce(pushes: Push[], rows: EventRow[]) {
    const accepted = acceptedFor(pushes).map((r) => r.json.event_id);
    expect([...accepted].sort()).toEqual(rows.map((row) => row.id).sort());
  }

  it('posts every status of a push with its activity and its meta byte for byte, signed, with the configured credentials', async () => {
    await device();
    const [odd] = await accept(1);
    const [plain] = await accept(1, null);
    expect(await send([odd, plain])).toMatchObject({ kind: 'done', sent: 2 });
    for (const type of ['delivered', 'opened', 'clicked'] as const) expect(await engage(odd, type)).toMatchObject({ changed: true });

    start({ auth: { basic: { username: 'crm-operator', password: 'p:ss w0rd' }, apiKey: { header: 'X-Api-Key', value: 'key-123' } } });
    const rows = await settled([odd, plain]);
    expect(rows.every((row) => row.state === 'delivered')).toBe(true);

    const posts = acceptedFor([odd]);
    expect(posts.map((post) => post.json.status)).toEqual(['sent', 'delivered', 'opened', 'clicked']);
    const oddRows = rows.filter((row) => row.pushId === odd.pushId);
    expect(posts.map((post) => post.json.event_id)).toEqual(oddRows.map((row) => row.id));
    const { activity } = odd.request;
    posts.forEach((post, i) => {
      expect(post.method).toBe('POST');
      expect(post.path).toBe('/webhooks/push-status');
      expect(post.headers['content-type']).toBe('application/json');
      expect(Object.keys(post.json)).toEqual(['event_id', 'push_id', 'status', 'timestamp', 'activity', 'meta']);
      expect(post.json).toEqual({
        event_id: oddRows[i].id,
        push_id: odd.pushId,
        status: oddRows[i].status,
        timestamp: oddRows[i].occurredAt.toISOString(),
        activity: {
          id: activity.id,
          brand_id: brand,
          user_id: player,
          activity_id: activity.activity_id,
          action_group_id: activity.action_group_id,
          action_id: activity.action_id,
          trigger_hash: activity.trigger_hash,
        },
        meta: JSON.parse(ODD_META),
      });
      expect(post.json.timestamp).toMatch(RFC3339);
      // The meta as the CRM wrote it: same spaces, 1.0, the big number and the escape, not re-serialized.
      expect(post.body.endsWith(`,"meta":${ODD_META}}`)).toBe(true);
      expect(post.body).toContain('"big": 12345678901234567890');
      expect(post.body).toContain('"u": "\\u00e9"');

      const signature = post.headers['x-signature'] as string;
      expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(verifySignature(SECRET, post.body, signature)).toBe(true);
      expect(verifySignature('another-secret', post.body, signature)).toBe(false);
      expect(verifySignature(SECRET, post.body.replace('"spring"', '"summer"'), signature)).toBe(false);

      expect(post.headers.authorization).toBe(`Basic ${Buffer.from('crm-operator:p:ss w0rd').toString('base64')}`);
      expect(post.headers['x-api-key']).toBe('key-123');
    });

    const [plainPost] = acceptedFor([plain]);
    expect(acceptedFor([plain])).toHaveLength(1);
    expect(plainPost.json).toMatchObject({ push_id: plain.pushId, status: 'sent' });
    expect(plainPost.json.meta).toEqual({});
    expect(plainPost.body).toMatch(/,"meta":\{\}\}$/);
    expect(verifySignature(SECRET, plainPost.body, plainPost.headers['x-signature'] as string)).toBe(true);
  });

  it('writes nothing for an event delivered at the first try: its row is never updated, and no range or retry is left', async () => {
    await device();
    const pushes = await accept(3);
    await send(pushes);
    for (const push of pushes) await engage(push, 'delivered');
    // Where each event's row version sits and which transaction wrote it: an update moves both.
    const versions = async () =>
      (
        await db.pool.query<{ id: string; version: string }>(
          `SELECT id, ctid::text || '/' || xmin::text AS version FROM events WHERE push_id = ANY($1::uuid[]) ORDER BY id`,
          [pushes.map((p) => p.pushId)],
        )
      ).rows;
    const before = await versions();
    expect(before).toHaveLength(6);

    start();
    const rows = await settled(pushes);
    expect(rows.every((row) => row.state === 'delivered' && row.attempts === 1)).toBe(true);
    expect(await versions()).toEqual(before);
    const ids = before.map((row) => row.id);
    expect((await db.pool.query('SELECT 1 FROM dispatch_retries WHERE event_id = ANY($1::uuid[])', [ids])).rowCount).toBe(0);
    await until(async () => (await db.pool.query(`SELECT 1 FROM dispatch_ranges WHERE topic = 'push.status'`)).rowCount === 0, 'the range to be completed');
    expect(acceptedFor(pushes)).toHaveLength(6);
  });

  it('reports a failed push with the reason', async () => {
    const deadToken: PushProvider = {
      name: 'webpush',
      send: async (_notification, targets) => targets.map(() => ({ ok: false, error: { class: 'dead-token', code: 'unregistered', message: 'gone' } })),
      close: async () => undefined,
    };
    await device();
    const [gone] = await accept(1);
    expect(await send([gone], deadToken)).toMatchObject({ kind: 'done', failed: 1 });

    // A second player whose only device is deactivated after the push was accepted.
    const other = uniqueName('player');
    const deviceId = await device(other);
    const [inactive] = await accept(1, ODD_META, other);
    await db.device.update({ where: { id: deviceId }, data: { active: false } });
    expect(await send([inactive])).toMatchObject({ kind: 'done', failed: 1 });

    start();
    await settled([gone, inactive]);
    const [gonePost] = acceptedFor([gone]);
    const [inactivePost] = acceptedFor([inactive]);
    expect(gonePost.json).toMatchObject({ push_id: gone.pushId, status: 'failed', error: 'unregistered', meta: JSON.parse(ODD_META) });
    expect(inactivePost.json).toMatchObject({ push_id: inactive.pushId, status: 'failed', error: 'device-inactive' });
    expect(Object.keys(gonePost.json)).toEqual(['event_id', 'push_id', 'status', 'timestamp', 'activity', 'error', 'meta']);
    expect(gonePost.body.endsWith(`,"meta":${ODD_META}}`)).toBe(true);
    expect(acceptedFor([gone, inactive])).toHaveLength(2);
  });

  it('retries 500, 503, 429 (after its Retry-After) and 408, then delivers every event once, in order per push', async () => {
    await device();
    const pushes = await accept(2);
    await send(pushes);
    for (const push of pushes) await engage(push, 'delivered');
    crm.answer(500, 503, { status: 429, headers: { 'Retry-After': '1' } }, 408);

    start();
    // Reports that arrive while the dispatcher is busy with the failures.
    await until(() => receivedFor(pushes).length >= 2, 'the first attempts');
    for (const push of pushes) await engage(push, 'opened');
    for (const push of pushes) await engage(push, 'clicked');

    const rows = await settled(pushes, 8000);
    expect(rows).toHaveLength(8);
    expect(rows.every((row) => row.state === 'delivered' && row.lastError === null)).toBe(true);
    expect(rows.reduce((sum, row) => sum + row.attempts, 0)).toBe(8 + 4);

    const all = receivedFor(pushes);
    expect(all.slice(0, 4).map((r) => r.status)).toEqual([500, 503, 429, 408]);
    expectEachOnce(pushes, rows);
    for (const push of pushes) expect(acceptedFor([push]).map((r) => r.json.status)).toEqual(['sent', 'delivered', 'opened', 'clicked']);
    expectInOrder(all);

    // The event answered 429 was not tried again before its Retry-After.
    const limited = all[2];
    const again = all.slice(3).find((r) => r.json.event_id === limited.json.event_id)!;
    expect(again.at - limited.answeredAt!).toBeGreaterThanOrEqual(950);
    expect(limited.headers.authorization).toBeUndefined();
  });

  it('loses nothing while the receiver is down, and delivers all once it is back', async () => {
    await device();
    const pushes = await accept(2);
    await crm.down();
    start();
    await send(pushes);
    for (const push of pushes) await engage(push, 'delivered');

    const refused = await until(async () => {
      const rows = await eventRows(pushes);
      return rows.filter((row) => row.status === 'sent').every((row) => row.attempts >= 2) && rows;
    }, 'the dispatcher to try the receiver that is down');
    expect(refused.filter((row) => row.status === 'sent').map((row) => row.lastError)).toEqual([
      expect.stringContaining('ECONNREFUSED'),
      expect.stringContaining('ECONNREFUSED'),
    ]);
    expect(refused.every((row) => row.state === 'pending')).toBe(true);
    for (const push of pushes) await engage(push, 'opened');

    await crm.up();
    const rows = await settled(pushes);
    expect(rows).toHaveLength(6);
    expect(rows.every((row) => row.state === 'delivered')).toBe(true);
    expectEachOnce(pushes, rows);
    expectInOrder(receivedFor(pushes));
    for (const push of pushes) expect(acceptedFor([push]).map((r) => r.json.status)).toEqual(['sent', 'delivered', 'opened']);
  });

  it('retries a receiver slower than the timeout, and delivers once it answers in time', async () => {
    await device();
    const [push] = await accept(1);
    await send([push]);
    await engage(push, 'delivered');
    crm.slow(600);

    start();
    await until(async () => (await eventRows([push]))[0].attempts >= 2, 'two attempts that time out');
    const [first] = await eventRows([push]);
    expect(first).toMatchObject({ status: 'sent', state: 'pending', lastError: 'timeout after 300 ms' });
    crm.slow(100); // slow, but within the timeout

    const rows = await settled([push]);
    expect(rows.every((row) => row.state === 'delivered')).toBe(true);
    const posts = receivedFor([push]);
    const sentPosts = posts.filter((r) => r.json.status === 'sent');
    expect(sentPosts.length).toBeGreaterThanOrEqual(3);
    expect(sentPosts.slice(0, -1).every((r) => r.aborted && r.status === undefined)).toBe(true);
    expect(rows[0].attempts).toBe(sentPosts.length);
    expectEachOnce([push], rows);
    expectInOrder(posts);
  });

  it('sends a refused event to the dead letters, carries on with the push’s later events, and sends it again when redriven', async () => {
    await device();
    const pushes = await accept(3);
    await send(pushes);
    for (const push of pushes) await engage(push, 'delivered');
    crm.answer(400, 401, 404);

    start();
    const rows = await settled(pushes);
    const sentRows = rows.filter((row) => row.status === 'sent');
    expect(sentRows.map((row) => row.state)).toEqual(['dead', 'dead', 'dead']);
    expect(sentRows.map((row) => row.attempts)).toEqual([1, 1, 1]);
    // With the start of the receiver's answer, which says why.
    expect(sentRows.map((row) => row.lastError).sort()).toEqual(['HTTP 400: scripted 400', 'HTTP 401: scripted 401', 'HTTP 404: scripted 404']);
    // Not retried, and the push's later event still went out.
    expect(receivedFor(pushes).filter((r) => r.json.status === 'sent')).toHaveLength(3);
    expect(rows.filter((row) => row.status === 'delivered').map((row) => row.state)).toEqual(['delivered', 'delivered', 'delivered']);
    expect(acceptedFor(pushes).map((r) => r.json.status)).toEqual(['delivered', 'delivered', 'delivered']);

    const dead = (await listDeadLetters(db.pool, 100000)).filter((letter) => mine.has(letter.pushId ?? ''));
    expect(dead).toHaveLength(3);
    for (const letter of dead) {
      const row = sentRows.find((r) => r.id === letter.id)!;
      expect(letter).toEqual({
        id: row.id,
        topic: 'push.status',
        pushId: row.pushId,
        status: 'sent',
        attempts: 1,
        lastError: row.lastError,
        occurredAt: row.occurredAt,
      });
    }

    // A report after the refusal also goes out.
    await engage(pushes[0], 'opened');
    await settled([pushes[0]]);
    expect(acceptedFor([pushes[0]]).map((r) => r.json.status)).toEqual(['delivered', 'opened']);

    const redriven = dead[0];
    expect(await redriveDeadLetters(db.pool, 60000, [redriven.id])).toBe(1);
    await until(async () => (await eventRows(pushes)).find((row) => row.id === redriven.id)!.state === 'delivered', 'the redriven event');
    const again = crm.accepted.filter((r) => r.json?.event_id === redriven.id);
    expect(again).toHaveLength(1);
    expect(again[0].json).toMatchObject({ push_id: redriven.pushId, status: 'sent' });
    expect(verifySignature(SECRET, again[0].body, again[0].headers['x-signature'] as string)).toBe(true);
    const stillDead = (await eventRows(pushes)).filter((row) => row.state === 'dead').map((row) => row.id);
    expect(stillDead.sort()).toEqual(dead.slice(1).map((letter) => letter.id).sort());
  });

  it('gives up on an event past its maximum age while the receiver keeps failing', async () => {
    await device();
    const [old] = await accept(1);
    await send([old]);
    await sleep(350); // older than the maximum age before its first attempt
    const [young] = await accept(1);
    await send([young]);
    crm.respondWith(503);

    start({ maxAgeMs: 300 });
    const rows = await settled([old, young]);
    const byPush = new Map(rows.map((row) => [row.pushId, row]));
    expect(byPush.get(old.pushId)).toMatchObject({ state: 'dead', attempts: 1, lastError: 'HTTP 503: scripted 503; gave up after the maximum age' });
    expect(byPush.get(young.pushId)).toMatchObject({ state: 'dead', lastError: 'HTTP 503: scripted 503; gave up after the maximum age' });
    // The young one was retried until its age ran out.
    expect(byPush.get(young.pushId)!.attempts).toBeGreaterThanOrEqual(2);
    expect(receivedFor([young])).toHaveLength(byPush.get(young.pushId)!.attempts);
    expect(acceptedFor([old, young])).toHaveLength(0);
    const dead = (await listDeadLetters(db.pool, 100000)).filter((letter) => mine.has(letter.pushId ?? ''));
    expect(dead.map((letter) => letter.id).sort()).toEqual(rows.map((row) => row.id).sort());
  });

  it('loses nothing when a dispatcher is killed mid-delivery: another takes its events after the lease, with the same event ids', async () => {
    await device();
    const pushes = await accept(2);
    await send(pushes);
    for (const push of pushes) await engage(push, 'delivered');
    crm.answer({ status: 200, delayMs: 1000 }); // the receiver holds the first post

    // The first dispatcher claims and posts, then dies while one post is in flight: its connections
    // are gone, so it cannot record that one (a post answered before that was recorded at once).
    const doomedDb = createDb({ url: process.env.DATABASE_URL!, poolSize: 2 });
    const doomed = createDispatcher(options({ db: doomedDb, timeoutMs: 5000, leaseMs: 500 }));
    const claimedAt = Date.now();
    const abandoned = doomed.runOnce().then(
      () => undefined,
      (error: Error) => error,
    );
    await until(() => receivedFor(pushes).length >= 2, 'the first dispatcher to post');
    await closeDb(doomedDb);

    start({ leaseMs: 500 });
    const rows = await settled(pushes);
    expect(rows.every((row) => row.state === 'delivered')).toBe(true);
    expect(await abandoned).toBeInstanceOf(Error); // it could not record what it did
    const posts = receivedFor(pushes);

    // The post in flight was posted again, by the second dispatcher, only once the lease had passed.
    const seen = new Set<string>();
    const retaken = posts.filter((post) => seen.has(post.json.event_id) || !seen.add(post.json.event_id));
    expect(retaken.length).toBeGreaterThanOrEqual(1);
    expect(retaken.every((r) => r.at - claimedAt >= 450)).toBe(true);

    // Everything arrived; the repeats (at least once) carry the same event id and the same body.
    const ids = rows.map((row) => row.id);
    expect(crm.uniqueEventIds(of(pushes)).sort()).toEqual([...ids].sort());
    expect(posts.every((r) => ids.includes(r.json.event_id))).toBe(true);
    const bodies = new Map<string, string>();
    for (const post of posts) {
      expect(bodies.get(post.json.event_id) ?? post.body).toBe(post.body);
      bodies.set(post.json.event_id, post.body);
    }
    expect(posts.length).toBeGreaterThan(ids.length);
    // Their first arrivals are in order per push.
    const firsts = posts.filter((post, i) => posts.findIndex((p) => p.json.event_id === post.json.event_id) === i);
    expectInOrder(firsts);
  });

  it('keeps a result through a PostgreSQL cut right after its post, and never posts the event again', async () => {
    await device();
    const [push] = await accept(1);
    await send([push]);
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(process.env.DATABASE_URL!).port || 5432)).start();
    const cutDb = createDb({ url: proxy.urlFor(process.env.DATABASE_URL!), poolSize: 2, connectTimeoutMs: 300 });
    try {
      crm.answer({ status: 200, delayMs: 200 });
      const round = createDispatcher(options({ db: cutDb, leaseMs: 500, timeoutMs: 1000 })).runOnce();
      // PostgreSQL goes away while the CRM takes the post, and comes back a second later.
      await until(() => receivedFor([push]).length === 1, 'the post');
      await proxy.stop();
      setTimeout(() => void proxy.resume(), 1000);
      expect(await round).toBe(1);
      expect((await eventRows([push])).map((row) => row.state)).toEqual(['delivered']);

      // Long after the lease, another dispatcher finds nothing to post again.
      start({ leaseMs: 500 });
      await new Promise((resolve) => setTimeout(resolve, 800));
      expect(receivedFor([push])).toHaveLength(1);
    } finally {
      await closeDb(cutDb);
      await proxy.stop();
    }
  });

  it('gives back, at shutdown past its deadline, the range it has not finished: another dispatcher posts it at once, with the same event ids', async () => {
    await device();
    const pushes = await accept(3);
    await send(pushes);
    crm.slow(400);
    const dispatcher = createDispatcher(options({ concurrency: 1, timeoutMs: 2000, leaseMs: 60000 }));
    const round = dispatcher.runOnce();
    await until(() => receivedFor(pushes).length === 1, 'the first post');
    expect(await dispatcher.release()).toBe(1);
    crm.slow(0);
    await round;
    expect(receivedFor(pushes)).toHaveLength(1);
    // Long before the 60 s lease, the next dispatcher takes the range given back, from its start.
    await createDispatcher(options({ leaseMs: 60000 })).runOnce();
    const rows = await settled(pushes);
    expect(rows.every((row) => row.state === 'delivered')).toBe(true);
    expect(crm.uniqueEventIds(of(pushes)).sort()).toEqual(rows.map((row) => row.id).sort());
    expect(receivedFor(pushes)).toHaveLength(4);
  });

  it('sends each event once, in order, with several dispatchers on a slow receiver whose round outlasts the lease', async () => {
    await device();
    const pushes = await accept(4);
    await send(pushes);
    for (const push of pushes) await engage(push, 'delivered');
    crm.slow(200); // within the timeout, but four posts one after another take longer than the lease

    start({ concurrency: 1, leaseMs: 500 });
    start({ concurrency: 1, leaseMs: 500 });
    const rows = await settled(pushes, 8000);
    expect(rows.every((row) => row.state === 'delivered')).toBe(true);
    expectEachOnce(pushes, rows);
    expect(receivedFor(pushes)).toHaveLength(rows.length);
    expectInOrder(receivedFor(pushes));
  });

  it('posts thousands of events with many in flight, claiming more while posts are out, each once', async () => {
    // Pushes already sent (their `sent` event waiting), written the way the send recorder writes them.
    const { rows } = await db.pool.query<{ pushId: string }>(
      `WITH m AS (
         INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, meta, crm_headers, status)
         SELECT gen_random_uuid(), DATE '1970-01-01', $1, i, $2, 1, 2, 3, 'th-' || i, '{}'::json, $3::json, '{}'::jsonb, 'sent' FROM generate_series(1, 3000) AS i
         RETURNING id)
       INSERT INTO events (id, topic, ordering_key, push_id, status) SELECT gen_random_uuid(), 'push.status', m.id::text, m.id, 'sent' FROM m
       RETURNING push_id AS "pushId"`,
      [brand, player, ODD_META],
    );
    const pushes = rows.map(({ pushId }) => ({ pushId }) as Push);
    for (const push of pushes) mine.add(push.pushId);
    crm.slow(20);

    const startedAt = Date.now();
    // One after another these posts would take a minute; claims of 500 would each wait for the slowest.
    start({ concurrency: 64, batchSize: 500, timeoutMs: 2000, leaseMs: 10000 });
    const settledRows = await settled(pushes, 20000);
    expect(Date.now() - startedAt).toBeLessThan(15000);
    expect(settledRows.every((row) => row.state === 'delivered')).toBe(true);
    expectEachOnce(pushes, settledRows);
    const posts = receivedFor(pushes);
    expect(posts).toHaveLength(3000);
    expect(posts.every((post) => post.body.endsWith(`,"meta":${ODD_META}}`))).toBe(true);

    // How many posts the receiver held at once, at most.
    const edges = posts.flatMap((post) => [
      { at: post.at, step: 1 },
      { at: post.answeredAt!, step: -1 },
    ]);
    edges.sort((a, b) => a.at - b.at || a.step - b.step);
    let inFlight = 0;
    let most = 0;
    for (const edge of edges) most = Math.max(most, (inFlight += edge.step));
    expect(most).toBeGreaterThanOrEqual(32);
    expect(most).toBeLessThanOrEqual(64);
  });

  it('writes no event for duplicate or late reports, nor for a report that beats the worker', async () => {
    await device();
    const [push, early] = await accept(2);
    await send([push]);
    const twice = await Promise.all([engage(push, 'delivered'), engage(push, 'delivered')]);
    expect(twice.filter((result) => result.found && result.changed)).toHaveLength(1);
    expect(await engage(push, 'delivered')).toEqual({ found: true, sent: true, changed: false, status: 'delivered' });
    expect(await engage(push, 'clicked')).toEqual({ found: true, sent: true, changed: true, status: 'clicked' });
    expect(await engage(push, 'opened')).toEqual({ found: true, sent: true, changed: false, status: 'clicked' });
    expect(await engage(push, 'clicked')).toEqual({ found: true, sent: true, changed: false, status: 'clicked' });

    // The device reports before the worker recorded the send: refused, nothing written; the same
    // report once the send is recorded moves the push.
    expect(await engage(early, 'opened')).toEqual({ found: true, sent: false, changed: false, status: 'accepted' });
    expect(await db.message.findFirstOrThrow({ where: { id: early.pushId } })).toMatchObject({ status: 'accepted' });
    expect(await send([early])).toMatchObject({ kind: 'done', sent: 1 });
    expect(await engage(early, 'opened')).toEqual({ found: true, sent: true, changed: true, status: 'opened' });

    start();
    const rows = await settled([push, early]);
    expect(rows.filter((row) => row.pushId === push.pushId).map((row) => row.status)).toEqual(['sent', 'delivered', 'clicked']);
    expect(rows.filter((row) => row.pushId === early.pushId).map((row) => row.status)).toEqual(['sent', 'opened']);
    expect(acceptedFor([push]).map((r) => r.json.status)).toEqual(['sent', 'delivered', 'clicked']);
    expect(acceptedFor([early]).map((r) => r.json.status)).toEqual(['sent', 'opened']);
    expectEachOnce([push, early], rows);
  });
  it('takes a redirect for a refusal: the event goes to the dead letters with its status, and nothing goes where it points', async () => {
    const elsewhere = await FakeCrm.start();
    try {
      await device();
      const [push] = await accept(1);
      await send([push]);
      crm.answer({ status: 307, headers: { Location: elsewhere.url('/steal') } });

      start();
      const [sent] = (await settled([push])).filter((row) => row.status === 'sent');
      expect(sent).toMatchObject({ state: 'dead', attempts: 1, lastError: expect.stringMatching(/^HTTP 307/) });
      expect(elsewhere.received).toHaveLength(0);
    } finally {
      await elsewhere.close();
    }
  });

  it('reads only the start of a huge answer, and keeps no raw text of it', async () => {
    await device();
    const [push] = await accept(1);
    await send([push]);
    crm.answer({ status: 400, body: `<html>${'x'.repeat(5_000_000)}</html>` });

    start();
    const [sent] = (await settled([push])).filter((row) => row.status === 'sent');
    expect(sent).toMatchObject({ state: 'dead', lastError: 'HTTP 400' });
  });

  it('posts through the operator’s proxy (HTTP_PROXY) in absolute form, and nothing goes around it', async () => {
    // As Squid runs by default: CONNECT to 443 only, so a plain http:// receiver is no tunnel's.
    const proxy = await startConnectProxy({ credentials: { username: 'egress', password: 's3cret' }, connectPorts: [443] });
    try {
      await device();
      const pushes = await accept(3);
      await send(pushes);
      start({ proxy: { httpProxy: proxy.url, httpsProxy: proxy.url } });
      const rows = await settled(pushes);
      expect(rows.every((row) => row.state === 'delivered')).toBe(true);
      expect(acceptedFor(pushes)).toHaveLength(3);
      // Every post came through the proxy to the receiver, as a request in absolute form (POST http://host/path).
      expect(proxy.targets()).toEqual([new URL(crm.url('/')).host]);
      expect(proxy.connections.length).toBeGreaterThanOrEqual(3);
      for (const connection of proxy.connections) expect(connection).toMatchObject({ method: 'FORWARD', requestLine: expect.stringMatching(/^POST http:\/\/127\.0\.0\.1:\d+\//) });
      expect(proxy.refused).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  describe('with CRM_STATUS_WEBHOOK_BATCH_MAX', () => {
    /** The events of a request: those of its array, or the one object. */
    const eventsOf = (request: CrmRequest): any[] => (Array.isArray(request.json) ? request.json : [request.json]);
    const mineIn = (request: CrmRequest) => eventsOf(request).some((event) => mine.has(event?.push_id));
    const batchesFor = () => crm.received.filter(mineIn);

    beforeEach(() => {
      crm.only(mineIn);
    });

    /** `pushes` sent pushes, each with its `sent` then `delivered` event waiting, written as the recorder writes them. */
    async function pending(pushes: number): Promise<Push[]> {
      const { rows } = await db.pool.query<{ pushId: string }>(
        `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, meta, crm_headers, status)
         SELECT gen_random_uuid(), DATE '1970-01-01', $1, i, $2, 1, 2, 3, 'th-' || i, '{}'::json, $3::json, '{}'::jsonb, 'delivered' FROM generate_series(1, $4::int) AS i
         RETURNING id AS "pushId"`,
        [brand, player, ODD_META, pushes],
      );
      const ids = rows.map((row) => row.pushId);
      for (const status of ['sent', 'delivered']) {
        await db.pool.query(
          `INSERT INTO events (id, topic, ordering_key, push_id, status)
           SELECT gen_random_uuid(), 'push.status', p::text, p, $2 FROM unnest($1::uuid[]) AS p`,
          [ids, status],
        );
      }
      for (const id of ids) mine.add(id);
      return ids.map((pushId) => ({ pushId }) as Push);
    }

    it('posts arrays of at most the maximum, signed, each event once and in order per push', async () => {
      const pushes = await pending(60);
      start({ statusBatchMax: 50, batchSize: 200, leaseMs: 5000, timeoutMs: 1000 });
      const rows = await settled(pushes);
      expect(rows).toHaveLength(120);
      expect(rows.every((row) => row.state === 'delivered' && row.attempts === 1)).toBe(true);

      const batches = batchesFor();
      for (const batch of batches) {
        expect(Array.isArray(batch.json)).toBe(true);
        expect(batch.body.startsWith('[{"event_id":')).toBe(true);
        expect(verifySignature(SECRET, batch.body, batch.headers['x-signature'] as string)).toBe(true);
        expect(batch.status).toBe(200);
      }
      const sizes = batches.map((batch) => batch.json.length);
      expect(Math.max(...sizes)).toBe(50);
      expect(batches.length).toBeLessThan(120);

      // Each event once, with its meta byte for byte.
      const events = batches.flatMap(eventsOf).filter((event) => mine.has(event.push_id));
      expect(events.map((event) => event.event_id).sort()).toEqual(rows.map((row) => row.id).sort());
      expect(batches.every((batch) => batch.body.includes(`,"meta":${ODD_META}}`))).toBe(true);
      // In order per push: `sent` in an earlier post than `delivered`.
      for (const push of pushes) {
        const posts = ['sent', 'delivered'].map((status) =>
          batches.findIndex((batch) => eventsOf(batch).some((event) => event.push_id === push.pushId && event.status === status)),
        );
        expect(posts[0]).toBeGreaterThanOrEqual(0);
        expect(posts[1]).toBeGreaterThan(posts[0]);
      }
    });

    it('retries every event of a batch answered 503', async () => {
      const pushes = await pending(30);
      crm.answer(503);
      start({ statusBatchMax: 50, batchSize: 200, leaseMs: 5000, timeoutMs: 1000 });
      const rows = await settled(pushes);
      expect(rows.every((row) => row.state === 'delivered' && row.lastError === null)).toBe(true);

      const [refused, ...later] = batchesFor();
      expect(refused.status).toBe(503);
      const retried = new Set(eventsOf(refused).map((event) => event.event_id));
      expect(retried.size).toBeGreaterThan(1);
      for (const row of rows) expect(row.attempts).toBe(retried.has(row.id) ? 2 : 1);
      // Each delivered once, after the refusal.
      const delivered = later.filter((batch) => batch.status === 200).flatMap(eventsOf).filter((event) => mine.has(event.push_id));
      expect(delivered.map((event) => event.event_id).sort()).toEqual(rows.map((row) => row.id).sort());
    });

    it('sends every event of a batch answered 400 to the dead letters, and carries on with the pushes’ later events', async () => {
      const pushes = await pending(30);
      crm.answer(400);
      start({ statusBatchMax: 50, batchSize: 200, leaseMs: 5000, timeoutMs: 1000 });
      const rows = await settled(pushes);

      const [refused] = batchesFor();
      expect(refused.status).toBe(400);
      const refusedIds = new Set(eventsOf(refused).map((event) => event.event_id));
      const dead = rows.filter((row) => row.state === 'dead');
      expect(dead.map((row) => row.id).sort()).toEqual(rows.filter((row) => refusedIds.has(row.id)).map((row) => row.id).sort());
      expect(dead.length).toBeGreaterThan(1);
      expect(dead.every((row) => row.attempts === 1 && row.lastError === 'HTTP 400: scripted 400')).toBe(true);
      expect(rows.filter((row) => !refusedIds.has(row.id)).every((row) => row.state === 'delivered')).toBe(true);
      // Every `delivered` event went out, the pushes whose `sent` was refused included.
      expect(rows.filter((row) => row.status === 'delivered').every((row) => row.state === 'delivered')).toBe(true);

      const letters = (await listDeadLetters(db.pool, 100000)).filter((letter) => mine.has(letter.pushId ?? ''));
      expect(letters.map((letter) => letter.id).sort()).toEqual(dead.map((row) => row.id).sort());
    });

    it('posts one object per event with a maximum of 1, as without it', async () => {
      const pushes = await pending(10);
      start({ statusBatchMax: 1 });
      const rows = await settled(pushes);
      expect(rows.every((row) => row.state === 'delivered')).toBe(true);
      const posts = batchesFor();
      expect(posts).toHaveLength(20);
      expect(posts.every((post) => !Array.isArray(post.json) && post.body.startsWith('{"event_id":'))).toBe(true);
      expectEachOnce(pushes, rows);
    });

    it('refuses a maximum above 1 with the conversion format', () => {
      expect(() => createDispatcher(options({ statusBatchMax: 2, statusFormat: { format: 'conversion', deliveredOn: 'provider' } }))).toThrow(/event format/);
    });
  });
});
