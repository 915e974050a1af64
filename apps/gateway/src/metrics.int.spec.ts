import { randomUUID } from 'node:crypto';
import { metricsText } from '@operator/metrics';
import { fcmToken, INTERNAL_KEY, OPERATOR_KEY, pushRequest, uniqueBrandId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// What Prometheus scrapes from the gateway: every family of the catalog, the messages counted by
// what the CRM was answered, each request under its route template, and the store gauges read
// from PostgreSQL and Redis when scraped. Counters belong to the process: the test reads deltas.

const FAMILIES = [
  'operator_http_request_duration_seconds',
  'operator_messages_accepted_total',
  'operator_sends_total',
  'operator_send_duration_seconds',
  'operator_queue_jobs',
  'operator_outbox_pending_events',
  'operator_outbox_oldest_pending_seconds',
  'operator_dispatch_total',
  'operator_dead_letters',
  'operator_credits',
  'process_cpu_seconds_total',
  'nodejs_eventloop_lag_seconds',
];

/** Each sample by its name and labels as exposed. */
function samples(text: string): Map<string, number> {
  const map = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    map.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return map;
}

/** A brand a key is bound to: the one brand the accepted messages are labelled with by id. */
const NAMED_BRAND = uniqueBrandId();
const BRAND_KEY = 'metrics-spec-brand-key';

describe('GET /metrics on the gateway', () => {
  let h: Harness;
  const eventIds: string[] = [];

  beforeAll(async () => {
    h = await Harness.open({ OPERATOR_API_KEYS: `${OPERATOR_KEY},${BRAND_KEY}@${NAMED_BRAND}` });
  });
  afterAll(async () => {
    await h.stores.db.pool.query('DELETE FROM dispatch_retries WHERE event_id = ANY($1::uuid[])', [eventIds]);
    await h.stores.db.pool.query('DELETE FROM events WHERE id = ANY($1::uuid[])', [eventIds]);
    await h.close();
  });

  /** An outbox event of topic `bonus` in the given state, that occurred `ageSeconds` ago. */
  async function event(state: 'pending' | 'dead', ageSeconds: number) {
    const id = randomUUID();
    eventIds.push(id);
    // Pending: not handed to a dispatcher yet. Dead: its dead letter, as the dispatcher writes it.
    await h.stores.db.pool.query(
      `WITH e AS (
         INSERT INTO events (id, topic, ordering_key, status, body, occurred_at)
         VALUES ($1, 'bonus', $2, 'credited', '{}', now() - $4 * interval '1 second') RETURNING *)
       INSERT INTO dispatch_retries (event_id, topic, ordering_key, seq, state, attempts)
       SELECT e.id, e.topic, e.ordering_key, e.seq, 'dead', 3 FROM e WHERE $3 = 'dead'`,
      [id, `metrics-test:${id}`, state, ageSeconds],
    );
  }

  async function count(sql: string): Promise<number> {
    const { rows } = await h.stores.db.pool.query<{ count: string }>(sql);
    return Number(rows[0].count);
  }

  it('answers without an API key; after a push and a credit, counts each message by its answer, each request by route, and reads the stores', async () => {
    const before = samples(await metricsText());
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });

    const first = pushRequest(brand, player);
    expect((await h.single(first)).statusCode).toBe(200);
    expect((await h.single(first)).statusCode).toBe(200);
    expect((await h.single(pushRequest(brand, uniqueName('nobody')))).statusCode).toBe(404);
    expect((await h.single({ ...pushRequest(brand, player), title: 42 })).statusCode).toBe(400);
    const batch = await h.batch([first, pushRequest(brand, player), { ...pushRequest(brand, player), title: 42 }, pushRequest(brand, uniqueName('nobody')), 'not a message']);
    expect(batch.json()).toMatchObject({ successful: [{}, {}], failed: [{}, {}, {}], fatal: [] });
    expect((await h.post('/channels/push/batch', [first], { 'X-Service-Id': 'x'.repeat(600) })).statusCode).toBe(400);

    const credit = await h.post('/bonus/credit/funds', { user_id: player, amount: 5, currency: 'EUR' }, { 'X-Service-Id': uniqueName('svc') });
    expect(credit.statusCode).toBe(200);
    expect((await h.app.inject({ method: 'DELETE', url: `/v1/devices/${randomUUID()}`, headers: { 'x-api-key': INTERNAL_KEY } })).statusCode).toBe(404);
    expect((await h.app.inject({ method: 'GET', url: '/no/such/route' })).statusCode).toBe(404);

    await event('pending', 120);
    await event('dead', 5);
    const expected = {
      accepted: await count(`SELECT count(*) FROM credits WHERE status = 'accepted' AND brand_id = 0`),
      pendingBonus: await count(`SELECT count(*) FROM event_dispatch WHERE topic = 'bonus' AND state = 'pending'`),
      dead: await count(`SELECT count(*) FROM event_dispatch WHERE state = 'dead'`),
      // The head of the topic's queue (other suites may have left older pending events).
      oldestBonus: await count(
        `SELECT extract(epoch FROM now() - e.occurred_at)::float8 AS count FROM events e JOIN event_dispatch d ON d.id = e.id
          WHERE e.topic = 'bonus' AND d.state = 'pending' ORDER BY e.seq LIMIT 1`,
      ),
      fcmJobs: (await h.jobs('fcm')).length,
    };

    // The first scrape of this process: the store gauges are read now (later ones within a few
    // seconds are answered from that reading).
    const response = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    for (const family of FAMILIES) expect(response.body).toMatch(new RegExp(`^# TYPE ${family} `, 'm'));
    const after = samples(response.body);
    const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);

    // The brand no credential names is `other`; a message whose brand cannot be read, `none`.
    const messages = (mode: string, brand: string) =>
      ['accepted', 'duplicate', 'unreachable', 'invalid', 'fatal'].map((result) => delta(`operator_messages_accepted_total{mode="${mode}",result="${result}",brand="${brand}"}`));
    expect({
      single: messages('single', 'other'),
      singleUnread: messages('single', 'none'),
      batch: messages('batch', 'other'),
      batchUnread: messages('batch', 'none'),
    }).toEqual({ single: [1, 1, 1, 0, 0], singleUnread: [0, 0, 0, 1, 0], batch: [1, 1, 1, 2, 0], batchUnread: [0, 0, 0, 1, 0] });

    const requests = (method: string, route: string, status: number) =>
      delta(`operator_http_request_duration_seconds_count{method="${method}",route="${route}",status="${status}"}`);
    expect(requests('POST', '/channels/push/single', 200)).toBe(2);
    expect(requests('POST', '/channels/push/single', 404)).toBe(1);
    expect(requests('POST', '/channels/push/batch', 200)).toBe(1);
    expect(requests('POST', '/bonus/credit/funds', 200)).toBe(1);
    expect(requests('POST', '/v1/devices', 201)).toBe(1);
    expect(requests('DELETE', '/v1/devices/:id', 404)).toBe(1);
    expect(requests('GET', 'unmatched', 404)).toBe(1);

    // The funds credit went to BONUS_DEFAULT_BRAND (0); every state of a brand is reported.
    expect(after.get('operator_credits{state="accepted",brand="0"}')).toBe(expected.accepted);
    expect(after.get('operator_credits{state="completed",brand="0"}')).toEqual(expect.any(Number));
    expect(after.get('operator_credits{state="failed",brand="0"}')).toEqual(expect.any(Number));
    expect(after.get('operator_outbox_pending_events{topic="bonus"}')).toBe(expected.pendingBonus);
    expect(expected.oldestBonus).toBeGreaterThan(0);
    expect(after.get('operator_outbox_oldest_pending_seconds{topic="bonus"}')).toBeGreaterThanOrEqual(expected.oldestBonus - 1);
    expect(after.get('operator_outbox_oldest_pending_seconds{topic="bonus"}')).toBeLessThan(expected.oldestBonus + 10);
    expect(after.get('operator_outbox_pending_events{topic="push.status"}')).toEqual(expect.any(Number));
    expect(after.get('operator_outbox_pending_events{topic="balance"}')).toEqual(expect.any(Number));
    expect(after.get('operator_dead_letters')).toBe(expected.dead);
    expect(expected.fcmJobs).toBe(2);
    expect(after.get('operator_queue_jobs{queue="push-fcm",state="waiting"}')).toBe(expected.fcmJobs);
    for (const state of ['active', 'delayed', 'failed']) expect(after.get(`operator_queue_jobs{queue="push-fcm",state="${state}"}`)).toBe(0);
    expect(after.get('operator_queue_jobs{queue="push-webpush",state="waiting"}')).toBe(0);
  });

  it('labels the messages of a brand a credential names by its id', async () => {
    const player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: NAMED_BRAND, provider: 'fcm', platform: 'android', token: fcmToken() });
    const before = samples(await metricsText());
    expect((await h.single(pushRequest(NAMED_BRAND, player), { 'x-api-key': BRAND_KEY })).statusCode).toBe(200);
    expect((await h.single(pushRequest(NAMED_BRAND + 1, player), { 'x-api-key': BRAND_KEY })).statusCode).toBe(403);
    expect((await h.batch([pushRequest(NAMED_BRAND, uniqueName('nobody'))])).json().failed).toHaveLength(1);
    const after = samples(await metricsText());
    const delta = (labels: string) => (after.get(`operator_messages_accepted_total{${labels}}`) ?? 0) - (before.get(`operator_messages_accepted_total{${labels}}`) ?? 0);
    expect({
      accepted: delta(`mode="single",result="accepted",brand="${NAMED_BRAND}"`),
      refused: delta('mode="single",result="invalid",brand="other"'),
      unreachable: delta(`mode="batch",result="unreachable",brand="${NAMED_BRAND}"`),
    }).toEqual({ accepted: 1, refused: 1, unreachable: 1 });
  });
});
