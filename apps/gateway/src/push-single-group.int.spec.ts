import { fcmToken, pushRequest, TcpProxy, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { Harness, openBehindProxies } from './test/harness';

type Answer = Awaited<ReturnType<Harness['single']>>;

/** The transaction that wrote each message of the brand, by push_id. */
async function writtenBy(h: Harness, brand: number): Promise<Map<string, string>> {
  const rows = await h.stores.db.$queryRawUnsafe<{ id: string; xmin: string }[]>(
    'SELECT id::text AS id, xmin::text AS xmin FROM messages WHERE brand_id = $1',
    BigInt(brand),
  );
  return new Map(rows.map((row) => [row.id, row.xmin]));
}

const pushIdOf = (answer: Answer) => (answer.json() as { push_id: string }).push_id;

describe('singles stored together (group commit)', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  // A window long enough that requests sent together always land in one group.
  beforeAll(async () => {
    h = await Harness.open({ PUSH_SINGLE_GROUP_WINDOW_MS: '100', PUSH_SINGLE_GROUP_MAX: '50', PUSH_JOB_MAX_MESSAGES: '4' });
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
  });

  /** Job ids and push ids of the FCM queue's jobs that name any of `pushIds`. */
  async function jobsFor(pushIds: string[]) {
    const wanted = new Set(pushIds);
    return (await h.jobs('fcm')).filter((job) => job.data.pushIds.some((id) => wanted.has(id)));
  }

  it('stores concurrent singles in one transaction with one set of jobs, each answered with its own push_id', async () => {
    const requests = Array.from({ length: 10 }, () => pushRequest(brand, player));
    const answers = await Promise.all(requests.map((request) => h.single(request)));

    expect(answers.map((a) => a.statusCode)).toEqual(Array(10).fill(200));
    const pushIds = answers.map(pushIdOf);
    expect(new Set(pushIds).size).toBe(10);
    const written = await writtenBy(h, brand);
    expect([...written.keys()].sort()).toEqual([...pushIds].sort());
    expect(new Set(written.values()).size).toBe(1);

    // Each answer names the message its own request carried.
    const rows = await h.messageRows(brand);
    const crmIdOf = new Map(rows.map((row) => [row.id, Number(row.crmMessageId)]));
    expect(pushIds.map((id) => crmIdOf.get(id))).toEqual(requests.map((r) => r.activity.id));

    // Chunked like a batch: 10 messages in jobs of PUSH_JOB_MAX_MESSAGES (4), not one job each.
    const jobs = await jobsFor(pushIds);
    expect(jobs.map((job) => job.data.pushIds.length).sort()).toEqual([2, 4, 4]);
    expect(jobs.flatMap((job) => job.data.pushIds).sort()).toEqual([...pushIds].sort());
  });

  it("stores each single's own CRM headers", async () => {
    const requests = Array.from({ length: 4 }, () => pushRequest(brand, player));
    const answers = await Promise.all(requests.map((request, i) => h.single(request, { 'X-Service-Id': `svc-${i}`, 'X-Service-Triggerhash': `th-${i}` })));
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
    expect(new Set((await writtenBy(h, brand)).values()).size).toBe(1);

    const rows = await h.messageRows(brand);
    const headersOf = new Map(rows.map((row) => [row.id, row.crmHeaders]));
    answers.forEach((answer, i) => expect(headersOf.get(pushIdOf(answer))).toEqual({ id: `svc-${i}`, trigger_hash: `th-${i}` }));
  });

  it('answers copies of one message in the same group with one push_id, stored and queued once', async () => {
    const copied = pushRequest(brand, player);
    const other = pushRequest(brand, player);
    const answers = await Promise.all([copied, other, copied, { ...copied, title: 'a changed copy' }].map((request) => h.single(request)));

    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
    const [first, second, third, fourth] = answers.map(pushIdOf);
    expect(third).toBe(first);
    expect(fourth).toBe(first);
    expect(second).not.toBe(first);
    expect(await h.messageRows(brand)).toHaveLength(2);
    const queued = (await jobsFor([first, second])).flatMap((job) => job.data.pushIds);
    expect(queued.sort()).toEqual([first, second].sort());
  });

  it('answers a player without devices 404 and stores the others of the group', async () => {
    const reachable = Array.from({ length: 3 }, () => pushRequest(brand, player));
    const unreachable = pushRequest(brand, uniqueName('nobody'));
    const answers = await Promise.all([reachable[0], unreachable, reachable[1], reachable[2]].map((request) => h.single(request)));

    expect(answers.map((a) => a.statusCode)).toEqual([200, 404, 200, 200]);
    expect(answers[1].json()).toEqual({ error: expect.stringMatching(/no active device/), code: answers[1].statusCode });
    const written = await writtenBy(h, brand);
    expect(written.size).toBe(3);
    expect(new Set(written.values()).size).toBe(1);
  });

  describe('a row the database refuses', () => {
    afterEach(() => h.allowMessages());

    it('costs only its own request (503) while the rest of the group is stored, and is accepted when retried', async () => {
      const requests = Array.from({ length: 6 }, () => pushRequest(brand, player));
      const refused = requests[3].activity.id;
      await h.refuseMessage(refused);

      const jobsBefore = new Set((await h.jobs('fcm')).map((job) => job.id));
      const answers = await Promise.all(requests.map((request) => h.single(request)));
      expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 503, 200, 200]);
      expect(answers[3].headers['retry-after']).toBeDefined();
      expect(answers[3].json()).toEqual({ error: expect.any(String), code: answers[3].statusCode });

      const rows = await h.messageRows(brand);
      expect(rows.map((row) => row.id).sort()).toEqual(answers.filter((a) => a.statusCode === 200).map(pushIdOf).sort());
      // Every job queued names a stored message: the failed attempts left nothing behind.
      const newJobs = (await h.jobs('fcm')).filter((job) => !jobsBefore.has(job.id));
      expect(newJobs.flatMap((job) => job.data.pushIds).sort()).toEqual(rows.map((row) => row.id).sort());

      await h.allowMessages();
      const retried = await h.single(requests[3]);
      expect(retried.statusCode).toBe(200);
      expect(await h.messageRows(brand)).toHaveLength(6);
    });
  });
});

describe('groups racing each other', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  // Two messages a group: requests sent together make several groups, stored at the same time.
  beforeAll(async () => {
    h = await Harness.open({ PUSH_SINGLE_GROUP_WINDOW_MS: '1000', PUSH_SINGLE_GROUP_MAX: '2' });
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
  });

  it('stores a full group at once, without waiting for the window', async () => {
    const answers = await Promise.all([pushRequest(brand, player), pushRequest(brand, player)].map((request) => h.single(request)));
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200]);
  });

  it('answers copies of one message in racing groups with one push_id', async () => {
    const request = pushRequest(brand, player);
    const answers = await Promise.all(Array.from({ length: 8 }, () => h.single(request)));
    expect(answers.map((a) => a.statusCode)).toEqual(Array(8).fill(200));
    expect(new Set(answers.map(pushIdOf)).size).toBe(1);
    expect(await h.messageRows(brand)).toHaveLength(1);
    expect((await h.jobs('fcm')).filter((job) => job.data.pushIds.includes(pushIdOf(answers[0])))).toHaveLength(1);
  });

  it('stores two groups holding the same messages in opposite orders', async () => {
    const pairs = Array.from({ length: 6 }, () => [pushRequest(brand, player), pushRequest(brand, player)]);
    const answers = await Promise.all(pairs.flatMap(([a, b]) => [a, b, b, a]).map((request) => h.single(request)));
    expect(answers.map((a) => a.statusCode)).toEqual(Array(24).fill(200));
    for (let i = 0; i < answers.length; i += 4) {
      const [a, b, b2, a2] = answers.slice(i, i + 4).map(pushIdOf);
      expect([a2, b2]).toEqual([a, b]);
    }
    expect(await h.messageRows(brand)).toHaveLength(12);
  });
});

describe('singles stored together, when a store is down', () => {
  let redisProxy: TcpProxy;
  let pgProxy: TcpProxy;
  let h: Harness;
  let brand: number;
  let player: string;

  let proxied: Awaited<ReturnType<typeof openBehindProxies>>;

  beforeAll(async () => {
    proxied = await openBehindProxies({ PUSH_SINGLE_GROUP_WINDOW_MS: '100' });
    ({ h, redis: redisProxy, postgres: pgProxy } = proxied);
  });
  afterAll(() => proxied.close());

  beforeEach(async () => {
    await proxied.heal();
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
  });

  const sendGroup = (requests: ReturnType<typeof pushRequest>[]) => Promise.all(requests.map((request) => h.single(request)));

  function expectAll503(answers: Answer[]) {
    for (const answer of answers) {
      expect(answer.statusCode).toBe(503);
      expect(answer.json()).toEqual({ error: expect.any(String), code: answer.statusCode });
      expect(answer.headers['retry-after']).toBeDefined();
    }
  }

  it('answers every request 503 and stores nothing while Redis is down, and accepts them once it is back', async () => {
    const requests = Array.from({ length: 5 }, () => pushRequest(brand, player));
    await redisProxy.stop();
    await until(() => h.stores.redis.status !== 'ready', 'the client to see Redis gone');

    expectAll503(await sendGroup(requests));
    expect(await h.messageRows(brand)).toEqual([]);

    await redisProxy.resume();
    await until(() => h.stores.redis.status === 'ready', 'Redis to reconnect');
    const retried = await sendGroup(requests);
    expect(retried.map((a) => a.statusCode)).toEqual(Array(5).fill(200));
    expect(await h.messageRows(brand)).toHaveLength(5);
  });

  it('answers every request 503 and rolls the whole group back when Redis stops answering mid-group', async () => {
    const requests = Array.from({ length: 5 }, () => pushRequest(brand, player));
    redisProxy.partition();
    expectAll503(await sendGroup(requests));
    expect(await h.messageRows(brand)).toEqual([]);
  });

  it('answers every request 503 while PostgreSQL is down', async () => {
    const requests = Array.from({ length: 5 }, () => pushRequest(brand, player));
    await pgProxy.stop();
    expectAll503(await sendGroup(requests));

    await pgProxy.resume();
    const retried = await sendGroup(requests);
    expect(retried.map((a) => a.statusCode)).toEqual(Array(5).fill(200));
    expect(await h.messageRows(brand)).toHaveLength(5);
  });
});
