import { v7 as uuidv7 } from 'uuid';
import {
  closeDb,
  createDb,
  inTransaction,
  listDeadLetters,
  readPushFeed,
  registerDevice,
  type Db,
} from '@operator/db';
import { createSandboxProvider, type PushProvider } from '@operator/providers';
import { acceptMessages, createSendRecorder, processSendJob, recordEngagement, type EngagementType, type SendRecorder } from '@operator/push';
import { closePushQueues, createProducerRedis, createPushQueues, type PushQueues, type RedisClient } from '@operator/queue';
import { FakeCrm, pushRequest, uniqueBrandId, uniqueName, until, webPushSubscription, type CrmRequest } from '@operator/testing';
import { redisUrlConnection } from '@operator/config';
import { createDispatcher, type Dispatcher } from './dispatcher';
import type { ConversionDeliveredOn } from './conversion';

// The status webhook in the CRM's conversion format, against a local receiver over HTTP, over the
// test database. A conversion carries no push id, so each push's meta holds a marker of its own:
// assertions look only at this test's posts, and the receiver's script applies to them only.

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
const USER = 'crm-conversions';
const PASSWORD = 'p:ss wörd';
/** The CRM's endpoint wants its trailing `/`. */
const PATH = '/api/v1/conversions/';

/** `meta` as a CRM might write it (spaces, 1.0, a number past 2^53, an escape): JSON.parse and stringify would change it. */
const oddMeta = (marker: string) => `{ "campaign" : "${marker}",  "n": 1.0, "big": 12345678901234567890, "u": "\\u00e9" }`;

interface Push {
  pushId: string;
  marker: string;
  meta: string;
}

interface EventRow {
  id: string;
  status: string;
  state: 'pending' | 'delivered' | 'dead';
  attempts: number;
  lastError: string | null;
}

describe('status webhook in the conversion format (PostgreSQL, a CRM receiver over HTTP)', () => {
  let db: Db;
  let producer: RedisClient;
  let queues: PushQueues;
  let crm: FakeCrm;
  let recorder: SendRecorder;
  const sandbox = createSandboxProvider('webpush');
  let brand: number;
  let player: string;
  /** The markers of this test's pushes. */
  let mine: string[];
  const running: Dispatcher[] = [];

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

  beforeEach(async () => {
    queues = createPushQueues(producer, uniqueName('test-conversions'));
    brand = uniqueBrandId();
    player = uniqueName('player');
    mine = [];
    crm.reset().only((request) => mine.some((marker) => request.body.includes(marker)));
    const subscription = webPushSubscription();
    await registerDevice(db, uuidv7(), {
      brandId: BigInt(brand),
      userId: player,
      provider: 'webpush',
      platform: 'web',
      token: subscription.endpoint,
      p256dh: subscription.keys.p256dh,
      auth: subscription.keys.auth,
    });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((dispatcher) => dispatcher.stop()));
    await Promise.all(Object.values(queues).map((queue) => queue.obliterate({ force: true }).catch(() => undefined)));
    await closePushQueues(queues);
  });

  function start(deliveredOn: ConversionDeliveredOn): Dispatcher {
    const dispatcher = createDispatcher({
      db,
      log: silent,
      urls: { 'push.status': crm.url(PATH) },
      secret: 'whsec-test-secret',
      auth: { basic: { username: USER, password: PASSWORD } },
      statusFormat: { format: 'conversion', deliveredOn },
      timeoutMs: 300,
      concurrency: 4,
      batchSize: 50,
      leaseMs: 500,
      maxAgeMs: 3_600_000,
      backoffMs: 20,
      maxBackoffMs: 200,
      idleMs: 20,
    });
    running.push(dispatcher);
    dispatcher.start();
    return dispatcher;
  }

  /** Accepts `count` pushes through the gateway's store path, each with its own marked meta, and sends them (sandbox: `sent`). */
  async function sendPushes(count: number, provider: PushProvider = sandbox): Promise<Push[]> {
    const pushes = Array.from({ length: count }, () => {
      const marker = uniqueName('conversion');
      return { marker, meta: oddMeta(marker) };
    });
    const requests = pushes.map(({ meta }) => pushRequest(brand, player, { meta: JSON.parse(meta) as Record<string, unknown> }));
    const outcomes = await acceptMessages(
      { db, redis: producer, queues, jobMaxMessages: 100, sendPolicy: { attempts: 4, backoffMs: 50 } },
      requests,
      {},
      pushes.map(({ meta }) => meta),
    );
    const accepted = outcomes.map((outcome, i) => {
      if (outcome.kind !== 'accepted') throw new Error(`push not accepted: ${outcome.kind}`);
      mine.push(pushes[i].marker);
      return { pushId: outcome.pushId, ...pushes[i] };
    });
    await processSendJob(
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
      { pushIds: accepted.map((push) => push.pushId), attempt: 1, maxAttempts: 4, enqueuedAt: Date.now() },
    );
    return accepted;
  }

  async function engage(push: Push, ...types: EngagementType[]) {
    for (const type of types) expect(await inTransaction(db, (sql) => recordEngagement(sql, push.pushId, type))).toMatchObject({ changed: true });
  }

  async function eventRows(push: Push): Promise<EventRow[]> {
    const { rows } = await db.pool.query<EventRow>(
      `SELECT e.id, e.status, d.state, d.attempts, d.last_error AS "lastError" FROM events e JOIN event_dispatch d ON d.id = e.id
        WHERE e.push_id = $1 ORDER BY e.seq`,
      [push.pushId],
    );
    return rows;
  }

  /** Waits until none of the pushes' events is pending. */
  const settled = (pushes: Push[]) =>
    Promise.all(
      pushes.map((push) =>
        until(async () => {
          const rows = await eventRows(push);
          return rows.length > 0 && rows.every((row) => row.state !== 'pending') && rows;
        }, `the events of push ${push.pushId} to be dispatched`),
      ),
    );

  const postsOf = (push: Push) => crm.received.filter((request) => request.body.includes(push.marker));
  const acceptedOf = (push: Push) => crm.accepted.filter((request) => request.body.includes(push.marker));
  const actions = (requests: CrmRequest[]) => requests.map((request) => request.json.action);

  it('posts delivered (on the provider’s acceptance), read and clicked once each, to the URL as given, with Basic auth and the meta byte for byte', async () => {
    const [push] = await sendPushes(1);
    await engage(push, 'delivered', 'opened', 'clicked');

    start('provider');
    const [rows] = await settled([push]);
    expect(rows.map((row) => [row.status, row.state])).toEqual([
      ['sent', 'delivered'],
      ['delivered', 'delivered'],
      ['opened', 'delivered'],
      ['clicked', 'delivered'],
    ]);

    const posts = postsOf(push);
    // `sent` is the delivery; the device's `delivered` report is not a second one.
    expect(actions(posts)).toEqual(['delivered', 'read', 'clicked']);
    expect(acceptedOf(push)).toHaveLength(3);
    for (const post of posts) {
      expect(post.method).toBe('POST');
      expect(post.path).toBe(PATH);
      expect(post.headers['content-type']).toBe('application/json');
      expect(post.headers.authorization).toBe(`Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`);
      expect(Object.keys(post.json)).toEqual(['action', 'metadata']);
      expect(post.body).toBe(`{"action":"${post.json.action}","metadata":${push.meta}}`);
    }
    // The meta as the CRM wrote it: spaces, 1.0, the big number and the escape, not re-serialized.
    expect(posts[0].body).toContain('"big": 12345678901234567890');
    expect(posts[0].body).toContain('"u": "\\u00e9"');
  });

  it('posts delivered when the device reports it, and nothing for a push only the provider accepted', async () => {
    const [reported, openedOnly, unreported] = await sendPushes(3);
    await engage(reported, 'delivered', 'opened', 'clicked');
    await engage(openedOnly, 'opened');

    start('device');
    const [reportedRows, , unreportedRows] = await settled([reported, openedOnly, unreported]);
    expect(reportedRows.every((row) => row.state === 'delivered')).toBe(true);

    expect(actions(postsOf(reported))).toEqual(['delivered', 'read', 'clicked']);
    expect(actions(postsOf(openedOnly))).toEqual(['read']);
    expect(postsOf(unreported)).toHaveLength(0);
    expect(unreportedRows.map((row) => [row.status, row.state])).toEqual([['sent', 'delivered']]);
    for (const push of [reported, openedOnly]) {
      for (const post of postsOf(push)) expect(post.body).toBe(`{"action":"${post.json.action}","metadata":${push.meta}}`);
    }
  });

  it('posts nothing for a failed push, marks its event done, and keeps it in the polling feed', async () => {
    const deadToken: PushProvider = {
      name: 'webpush',
      send: async (_notification, targets) => targets.map(() => ({ ok: false, error: { class: 'dead-token', code: 'unregistered', message: 'gone' } })),
      close: async () => undefined,
    };
    const [sent] = await sendPushes(1);
    const [failed] = await sendPushes(1, deadToken);

    start('provider');
    const [, [failedRow]] = await settled([sent, failed]);
    expect(failedRow).toMatchObject({ status: 'failed', state: 'delivered', lastError: null });
    expect(postsOf(failed)).toHaveLength(0);
    // The dispatcher was running all along: the push it counts did go out.
    expect(actions(postsOf(sent))).toEqual(['delivered']);

    const { rows } = await db.pool.query<{ seq: string }>(`SELECT feed_seq::text AS seq FROM events WHERE id = $1`, [failedRow.id]);
    const feed = await readPushFeed(db.pool, BigInt(rows[0].seq) - 1n, 1);
    expect(feed.rows).toEqual([expect.objectContaining({ id: failedRow.id, pushId: failed.pushId, status: 'failed', meta: failed.meta })]);
  });

  it('retries 5xx and timeouts with backoff, and posts each action once after a 2xx', async () => {
    const [push] = await sendPushes(1);
    await engage(push, 'delivered', 'opened');
    crm.answer(500, 503, { status: 200, delayMs: 600 }); // the third answer comes after the timeout

    start('provider');
    const [rows] = await settled([push]);
    expect(rows.every((row) => row.state === 'delivered' && row.lastError === null)).toBe(true);
    expect(rows.find((row) => row.status === 'sent')!.attempts).toBe(4);

    const posts = postsOf(push);
    expect(actions(posts)).toEqual(['delivered', 'delivered', 'delivered', 'delivered', 'read']);
    expect(posts.slice(0, 2).map((post) => post.status)).toEqual([500, 503]);
    expect(posts[2].aborted).toBe(true);
    expect(actions(acceptedOf(push))).toEqual(['delivered', 'read']);
    // Nothing posted after the answers were recorded.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(postsOf(push)).toHaveLength(5);
  });

  it('sends a refused conversion to the dead letters with the CRM’s answer, and carries on with the push’s later ones', async () => {
    const [push] = await sendPushes(1);
    await engage(push, 'opened');
    const refusal = '{"error": "invalid action value: delivered"}';
    crm.answer({ status: 400, body: refusal });

    start('provider');
    const [rows] = await settled([push]);
    expect(rows.map((row) => [row.status, row.state, row.attempts])).toEqual([
      ['sent', 'dead', 1],
      ['opened', 'delivered', 1],
    ]);
    expect(rows[0].lastError).toBe("HTTP 400: invalid action value: delivered");
    expect(actions(postsOf(push))).toEqual(['delivered', 'read']);
    expect(actions(acceptedOf(push))).toEqual(['read']);

    const letters = (await listDeadLetters(db.pool, 100000)).filter((letter) => letter.pushId === push.pushId);
    expect(letters).toEqual([expect.objectContaining({ id: rows[0].id, status: 'sent', attempts: 1, lastError: "HTTP 400: invalid action value: delivered" })]);
  });
});
