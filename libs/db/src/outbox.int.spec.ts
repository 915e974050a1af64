import { feedTop, uniqueBrandId, uniqueName, until } from '@operator/testing';
import { closeDb, createDb, type Db, type Sql } from './client';
import { PUSH_STATUS_TOPIC, readPushFeed } from './feed';
import { rangeEvents, takeRange } from './outbox';
import { dayOf, ensurePartitions, partitionName } from './partitions';
import { nodes, plans as plansOf, type PlanNode } from './test/plans';

// The outbox's readers against PostgreSQL: the dispatchers' ranges, which must not read the events
// already handed out however many the table keeps, and the polling feed, which only reads and never
// lets a poller skip an event that commits late.

describe('outbox (PostgreSQL)', () => {
  let db: Db;
  let brand: number;
  let crmIds = 0;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
  });
  afterAll(() => closeDb(db));
  beforeEach(() => {
    brand = uniqueBrandId();
  });

  /** `count` messages of this test's brand, each with a `sent` event of `topic`; answers the push ids. */
  async function pushes(sql: Sql, count: number, topic = PUSH_STATUS_TOPIC): Promise<string[]> {
    const { rows } = await sql.query<{ id: string }>(
      `WITH m AS (
         INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, meta, crm_headers, status)
         SELECT id, uuid_v7_day(id), $1, $4::bigint + i, 'player', 1, 2, 3, 'th-' || i, '{}'::json, '{}'::json, '{}'::jsonb, 'sent'
           FROM (SELECT uuid_v7() AS id, i FROM generate_series(1, $2::int) AS i) s RETURNING id)
       INSERT INTO events (id, topic, ordering_key, push_id, status)
       SELECT gen_random_uuid(), $3, m.id::text, m.id, 'sent' FROM m
       RETURNING push_id AS id`,
      [brand, count, topic, (crmIds += count) - count],
    );
    return rows.map((row) => row.id);
  }

  /** The plans of the statements `work` runs (EXPLAIN ANALYZE, in a transaction rolled back). */
  const plans = (work: (sql: Sql, explaining: Sql) => Promise<unknown>) => plansOf(db, work);

  /** Rows the plan read from events (not counting writes), and the entries its bitmap scans read from the events' indexes. */
  const eventsRead = (plan: PlanNode) =>
    nodes(plan)
      .filter(
        (node) =>
          (node['Relation Name'] === 'events' && node['Node Type'] !== 'ModifyTable') ||
          (node['Node Type'] === 'Bitmap Index Scan' && node['Index Name']!.startsWith('events_')),
      )
      .reduce((sum, node) => sum + (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 0), 0);

  it('takes a range reading only the events after the cursor, none of 300,000 handed out before', async () => {
    const topic = uniqueName('topic');
    // Events already handed out, committed in chunks (a long transaction would hold back every reader).
    for (let chunk = 0; chunk < 10; chunk++) {
      await db.pool.query(
        `INSERT INTO events (id, topic, ordering_key, status, body)
         SELECT gen_random_uuid(), $1, $2 || '-' || i, 'sent', '{}'::json FROM generate_series(1, 30000) AS i`,
        [topic, `${topic}-${chunk}`],
      );
    }
    await until(async () => (await takeRange(db.pool, topic, 10000, 60000)) === null, 'every old event handed out');
    await db.pool.query(`DELETE FROM dispatch_ranges WHERE topic = $1`, [topic]);
    const mine = await pushes(db.pool, 20, topic);
    await db.pool.query('ANALYZE events');
    try {
      const [, take] = await plans((_sql, explaining) => takeRange(explaining, topic, 1000, 30000));
      expect(nodes(take).filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'events')).toEqual([]);
      expect(eventsRead(take)).toBeLessThan(100);
      const range = (await takeRange(db.pool, topic, 1000, 30000))!;
      expect((await rangeEvents(db.pool, range)).map((event) => event.pushId).sort()).toEqual([...mine].sort());
    } finally {
      await db.pool.query(`DELETE FROM events WHERE topic = $1`, [topic]);
      await db.pool.query(`DELETE FROM dispatch_ranges WHERE topic = $1`, [topic]);
      await db.pool.query(`DELETE FROM messages WHERE brand_id = $1`, [brand]);
    }
  }, 120_000);

  it('reads a range in one probe of its key per event even when the burst came after the last ANALYZE', async () => {
    const topic = uniqueName('topic');
    // Today's partition of events, where the burst goes (a partitioned table has no storage of its own).
    const today = partitionName('events', dayOf(Date.now()));
    await db.pool.query(`ALTER TABLE ${today} SET (autovacuum_enabled = false)`);
    try {
      await db.pool.query(
        `INSERT INTO events (id, topic, ordering_key, status, body)
         SELECT gen_random_uuid(), $1, $1 || '-' || i, 'sent', '{}'::json FROM generate_series(1, 20000) AS i`,
        [topic],
      );
      await until(async () => (await takeRange(db.pool, topic, 10000, 60000)) === null, 'every old event handed out');
      await db.pool.query(`DELETE FROM dispatch_ranges WHERE topic = $1`, [topic]);
      await db.pool.query('ANALYZE events');
      // The statistics know none of them; then a campaign's statuses arrive.
      const burst: string[] = [];
      for (let chunk = 0; chunk < 5; chunk++) burst.push(...(await pushes(db.pool, 1000, topic)));
      const [read] = await plans(async (sql, explaining) => rangeEvents(explaining, (await takeRange(sql, topic, 5000, 30000))!));
      // A few probes per event (its key's earlier events), where a join reading every event of the
      // topic for each one reads millions.
      expect(eventsRead(read)).toBeLessThan(25000);
    } finally {
      await db.pool.query(`DELETE FROM events WHERE topic = $1`, [topic]);
      await db.pool.query(`DELETE FROM dispatch_ranges WHERE topic = $1`, [topic]);
      await db.pool.query(`DELETE FROM messages WHERE brand_id = $1`, [brand]);
      await db.pool.query(`ALTER TABLE ${today} RESET (autovacuum_enabled)`);
    }
  });

  it('reads a range in one probe of its key per event in a day partition with no statistics yet', async () => {
    const topic = uniqueName('topic');
    // A new day's partition, before autovacuum first analyzes it: a day of its own, far ahead.
    const day = '2036-04-10';
    await ensurePartitions(db.pool, day, day);
    const at = `${day}T12:00:00Z`;
    const insert = (count: number, status: string) =>
      db.pool.query(
        `INSERT INTO events (id, topic, ordering_key, status, body, occurred_at)
         SELECT gen_random_uuid(), $1, $1 || '-' || i, $3, '{}'::json, $4::timestamptz FROM generate_series(1, $2::int) AS i`,
        [topic, count, status, at],
      );
    try {
      await db.pool.query(`ALTER TABLE ${partitionName('events', day)} SET (autovacuum_enabled = false)`);
      await insert(50000, 'sent');
      await until(async () => (await takeRange(db.pool, topic, 10000, 60000)) === null, 'every old event handed out');
      await db.pool.query(`DELETE FROM dispatch_ranges WHERE topic = $1`, [topic]);
      // The next status of 500 of those pushes: each has an earlier event of its key, handed out.
      await insert(500, 'delivered');
      const [read] = await plans(async (sql, explaining) => rangeEvents(explaining, (await takeRange(sql, topic, 5000, 30000))!));
      // A probe of each event's key, where one that also reads the topic's index entries (the planner
      // had both indexes in a bitmap AND) reads 50,500 of them for each event.
      expect(eventsRead(read)).toBeLessThan(10000);
    } finally {
      await db.pool.query(`DELETE FROM dispatch_ranges WHERE topic = $1`, [topic]);
      for (const table of ['events', 'deliveries', 'messages'] as const) await db.pool.query(`DROP TABLE IF EXISTS ${partitionName(table, day)}`);
    }
  });

  it('reads the feed in a read-only transaction, and holds back events behind a transaction still running, never skipping them', async () => {
    const after = await feedTop(db.pool);
    const readOnly = async () => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN READ ONLY');
        return await readPushFeed(client, after, 1000);
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    const ofBrand = (ids: string[]) => (page: Awaited<ReturnType<typeof readPushFeed>>) => page.rows.filter((row) => ids.includes(row.pushId));

    // The slow transaction writes its event first (a smaller seq and transaction id) and commits last.
    const slow = await db.pool.connect();
    try {
      await slow.query('BEGIN');
      const [late] = await pushes(slow, 1);
      const [early] = await pushes(db.pool, 1);
      const mine = ofBrand([late, early]);

      const during = await readOnly();
      expect(mine(during)).toEqual([]);
      expect(during.held).toBe(true);

      await slow.query('COMMIT');
      // (Any transaction of the server still running holds the feed back too, for as long as it runs.)
      const page = await until(async () => {
        const read = await readOnly();
        return mine(read).length === 2 && read;
      }, 'both events in the feed');
      expect(mine(page).map((row) => row.pushId)).toEqual([late, early]);
      const cursors = page.rows.map((row) => BigInt(row.feedSeq));
      expect(cursors.every((cursor, i) => cursor > after && (i === 0 || cursor > cursors[i - 1]))).toBe(true);
    } finally {
      await slow.query('ROLLBACK').catch(() => undefined);
      slow.release();
    }
  });
});
