import pg from 'pg';
import {
  INTERNAL_KEY,
  OPERATOR_KEY,
  fcmToken,
  migratedPairDatabase,
  pushRequest,
  startPgBouncer,
  startPostgresPair,
  TcpProxy,
  uniqueBrandId,
  uniqueName,
  until,
  type PgBouncer,
  type PostgresPair,
} from '@operator/testing';
import { Harness } from './test/harness';

// Needs the PostgreSQL 15 binaries and pgbouncer. DATABASE_URL is a primary, DATABASE_READ_URL a
// hot standby of it behind PgBouncer in transaction mode with its defaults (so the read pool sends
// no startup parameter either), behind a proxy the test can cut. With the standby's replay paused,
// what the gateway answers shows where it read: a write it made a moment ago is missing from the
// reads that go to the replica, and present in those that stay on the primary. A write sent to
// the standby would fail (it refuses writes), so every write answered proves it went to the primary.

describe('reads on DATABASE_READ_URL, a hot standby', () => {
  let pair: PostgresPair;
  let bouncer: PgBouncer;
  let replica: TcpProxy;
  let h: Harness;
  let primary: pg.Pool;
  let standby: pg.Pool;

  beforeAll(async () => {
    pair = await startPostgresPair();
    const urls = await migratedPairDatabase(pair, 'gateway_reads');
    bouncer = await startPgBouncer(urls.standbyUrl);
    replica = await TcpProxy.forUrl(bouncer.url).start();
    h = await Harness.open({ DATABASE_URL: urls.primaryUrl, DATABASE_READ_URL: replica.urlFor(bouncer.url) });
    primary = new pg.Pool({ connectionString: urls.primaryUrl, max: 2 });
    standby = new pg.Pool({ connectionString: urls.standbyUrl, max: 2 });
    for (const pool of [primary, standby]) pool.on('error', () => undefined);
  }, 120000);
  afterAll(async () => {
    await replica?.resume();
    await h?.close();
    await Promise.all([primary, standby].map((pool) => pool?.end()));
    await replica?.stop();
    await bouncer?.stop();
    await pair?.stop();
  });

  async function caughtUp() {
    const { lsn } = (await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0];
    await until(async () => (await standby.query('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [lsn])).rows[0].done, 'the standby to catch up', 20000);
  }

  const crm = (method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = {}) =>
    h.app.inject({ method, url, headers: { 'x-api-key': OPERATOR_KEY, 'content-type': 'application/json', ...headers }, payload: body === undefined ? undefined : JSON.stringify(body) });
  const admin = (method: 'GET' | 'PUT', url: string, body?: unknown) =>
    h.app.inject({ method, url, headers: { 'x-api-key': INTERNAL_KEY, 'content-type': 'application/json' }, payload: body === undefined ? undefined : JSON.stringify(body) });
  const bonusBody = (label: string) => ({ label, type: 'WelcomeBonus', product: 'Casino', amount: '10.00', currency: 'EUR', validity_days: 30, wagering_requirement: 35 });
  const creditHeaders = () => ({ 'X-Service-Id': uniqueName('svc'), 'X-Service-Activityid': '5', 'X-Service-Actionid': '7', 'X-Service-Actiongroupid': '3' });
  const deadLetters = async () => Number(/^operator_dead_letters (\d+)$/m.exec((await h.app.inject({ method: 'GET', url: '/metrics' })).body)?.[1]);

  it('answers polling, listings, back-office reads and gauges from the replica; writes, credits and misses from the primary', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    const oldDevice = await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
    const oldBonus = uniqueName('bonus');
    expect((await admin('PUT', `/v1/bonuses/${oldBonus}`, bonusBody(`Old ${oldBonus}`))).statusCode).toBe(201);
    const accepted = await h.single(pushRequest(brand, player));
    expect(accepted.statusCode).toBe(200);
    const oldPush: string = accepted.json().push_id;
    await caughtUp();

    await standby.query('SELECT pg_wal_replay_pause()');
    try {
      // Writes while the replica stands still: each answered, so each went to the primary.
      const newDevice = await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
      const newBonus = uniqueName('bonus');
      expect((await admin('PUT', `/v1/bonuses/${newBonus}`, bonusBody(`New ${newBonus}`))).statusCode).toBe(201);
      const newPush: string = (await h.single(pushRequest(brand, player))).json().push_id;
      // A credit of the bonus the replica has not seen: its catalog read stays on the primary.
      const credit = await crm('POST', '/bonus/credit', { user_id: player, bonus_code: newBonus }, creditHeaders());
      expect(credit.statusCode).toBe(200);
      const creditId: string = credit.json().credit_id;
      await primary.query(`UPDATE messages SET status = 'sent' WHERE id = $1`, [oldPush]);
      // Its status event, which the CRM refused: a dead letter, and the first event of the feed.
      await primary.query(
        `WITH e AS (INSERT INTO events (id, topic, ordering_key, push_id, status) VALUES (gen_random_uuid(), 'push.status', $1::text, $1::uuid, 'sent') RETURNING *)
         INSERT INTO dispatch_retries (event_id, topic, ordering_key, seq, state, attempts, last_error) SELECT id, topic, ordering_key, seq, 'dead', 3, 'HTTP 400' FROM e`,
        [oldPush],
      );

      // Device listing, the catalog (back office and the CRM's dropdown): as the replica has them.
      const devices = (await admin('GET', `/v1/players/${player}/devices?brand_id=${brand}`)).json().devices.map((d: { id: string }) => d.id);
      expect(devices).toEqual([oldDevice.id]);
      const catalog = (await admin('GET', '/v1/bonuses')).json().bonuses.map((b: { code: string }) => b.code);
      expect(catalog).toContain(oldBonus);
      expect(catalog).not.toContain(newBonus);
      const dropdown = (await crm('GET', '/bonus/list')).json().Data.map((b: { value: string }) => b.value);
      expect(dropdown).toContain(oldBonus);
      expect(dropdown).not.toContain(newBonus);

      // Status polling: the replica's state of a push it has; one it has not yet, from the primary.
      expect((await crm('GET', `/channels/push/${oldPush}`)).json().status).toBe('accepted');
      expect((await crm('GET', `/channels/push/${newPush}`)).statusCode).toBe(200);
      const statuses = (await crm('GET', `/channels/push/status?push_id=${oldPush}&push_id=${newPush}`)).json();
      expect(statuses.not_found).toEqual([]);
      expect(Object.fromEntries(statuses.pushes.map((p: { push_id: string; status: string }) => [p.push_id, p.status]))).toEqual({ [oldPush]: 'accepted', [newPush]: 'accepted' });

      // Back-office reads: the credit list as the replica has it; one credit asked by id, from the primary.
      expect((await admin('GET', `/v1/credits?user_id=${player}`)).json().credits).toEqual([]);
      expect((await admin('GET', `/v1/credits/${creditId}`)).json()).toMatchObject({ credit_id: creditId });
      expect((await admin('GET', '/v1/webhooks/dead-letters')).json().events).toEqual([]);
      // The gauges: the replica has no dead letter yet.
      expect(await deadLetters()).toBe(0);
      // The events feed: nothing yet on the replica.
      expect((await crm('GET', '/channels/push/events?after=0')).json().events).toEqual([]);
    } finally {
      await standby.query('SELECT pg_wal_replay_resume()');
    }
    await caughtUp();

    expect((await admin('GET', `/v1/players/${player}/devices?brand_id=${brand}`)).json().devices).toHaveLength(2);
    expect((await crm('GET', `/channels/push/${oldPush}`)).json().status).toBe('sent');
    expect((await admin('GET', `/v1/credits?user_id=${player}`)).json().credits).toHaveLength(1);
    expect((await admin('GET', '/v1/webhooks/dead-letters')).json().events.map((e: { push_id: string }) => e.push_id)).toEqual([oldPush]);
    expect((await crm('GET', '/channels/push/events?after=0')).json().events.map((e: { push_id: string }) => e.push_id)).toEqual([oldPush]);
    // Once the gauges' last reading has aged out.
    await until(async () => (await deadLetters()) > 0, 'the dead-letter gauge to show the replayed dead letter', 10000);
  }, 60000);

  it('reads a feed page from the primary when the replica holds it back for a transaction the primary has ended', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
    const pushId: string = (await h.single(pushRequest(brand, player))).json().push_id;
    const cursor: string = (await crm('GET', '/channels/push/events?after=0&limit=1000')).json().next_cursor;

    const late = await primary.connect();
    try {
      await late.query('BEGIN');
      await late.query('SELECT pg_current_xact_id()');
      await primary.query(`INSERT INTO events (id, topic, ordering_key, push_id, status) VALUES (gen_random_uuid(), 'push.status', $1::text, $1::uuid, 'sent')`, [pushId]);
      await caughtUp();
      // The replica has the event, and the late transaction as running; the primary sees it end.
      await standby.query('SELECT pg_wal_replay_pause()');
      await late.query('COMMIT');
    } finally {
      late.release();
    }
    try {
      const held = await standby.query(`SELECT count(*)::int AS n FROM events WHERE feed_seq > $1 AND feed_seq >= events_feed_base(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)`, [cursor]);
      expect(held.rows[0].n).toBe(1);
      const page = (await crm('GET', `/channels/push/events?after=${cursor}`)).json();
      expect(page.events.map((e: { push_id: string; status: string }) => [e.push_id, e.status])).toEqual([[pushId, 'sent']]);
    } finally {
      await standby.query('SELECT pg_wal_replay_resume()');
    }
  });

  it('stays ready and takes writes while the replica is down, reading from the primary meanwhile', async () => {
    const ready = async () => {
      const response = await h.app.inject({ method: 'GET', url: '/health/ready' });
      return { status: response.statusCode, body: response.json() };
    };
    expect(await ready()).toMatchObject({ status: 200, body: { status: 'ready', postgres: 'up', postgres_read: 'up', redis: 'up' } });

    await replica.stop();
    try {
      expect(await ready()).toMatchObject({ status: 200, body: { status: 'ready', postgres: 'up', postgres_read: 'down' } });
      const brand = uniqueBrandId();
      const player = uniqueName('player');
      const device = await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
      const listed = await admin('GET', `/v1/players/${player}/devices?brand_id=${brand}`);
      expect(listed.statusCode).toBe(200);
      expect(listed.json().devices.map((d: { id: string }) => d.id)).toEqual([device.id]);
      const accepted = await h.single(pushRequest(brand, player));
      expect(accepted.statusCode).toBe(200);
      expect((await crm('GET', `/channels/push/${accepted.json().push_id}`)).json().status).toBe('accepted');
      expect((await crm('GET', '/channels/push/events?after=0')).statusCode).toBe(200);
    } finally {
      await replica.resume();
    }
    await until(async () => (await ready()).body.postgres_read === 'up', 'the replica to be reported up again', 10000);
  }, 60000);
});
