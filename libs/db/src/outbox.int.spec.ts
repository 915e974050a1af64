import type { PoolClient } from 'pg';
import { uniqueBrandId, uniqueName, until } from '@operator/testing';
import { closeDb, createDb, type Db, type Sql } from './client';
import { PUSH_STATUS_TOPIC, readPushFeed } from './feed';
import { claimDueEvents } from './outbox';

// The outbox's two readers against PostgreSQL: the dispatcher's claim, which must not read the
// delivered events however many the table keeps, and the polling feed, which only reads and never
// lets a poller skip an event that commits late.

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

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

  /** `count` messages of this test's brand, each with a `sent` event in `state`; answers the push ids. */
  async function pushes(sql: Sql, count: number, state: 'pending' | 'delivered' = 'pending'): Promise<string[]> {
    const { rows } = await sql.query<{ id: string }>(
      `WITH m AS (
         INSERT INTO messages (id, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, meta, crm_headers, status)
         SELECT gen_random_uuid(), $1, $5::bigint + i, 'player', 1, 2, 3, 'th-' || i, '{}'::json, '{}'::json, '{}'::jsonb, 'sent'
           FROM generate_series(1, $2::int) AS i RETURNING id)
       INSERT INTO events (id, topic, ordering_key, push_id, status, dispatch_state, delivered_at)
       SELECT gen_random_uuid(), $3, m.id::text, m.id, 'sent', $4::"DispatchState", CASE WHEN $4 = 'delivered' THEN now() END FROM m
       RETURNING push_id AS id`,
      [brand, count, PUSH_STATUS_TOPIC, state, (crmIds += count) - count],
    );
    return rows.map((row) => row.id);
  }

  /** The plan of the dispatcher's claim as it runs now (EXPLAIN ANALYZE, rolled back). */
  async function claimPlan(): Promise<{ Plan: PlanNode; 'Execution Time': number }> {
    const client: PoolClient = await db.pool.connect();
    try {
      await client.query('BEGIN');
      let plan: { Plan: PlanNode; 'Execution Time': number } | undefined;
      const explaining: Sql = {
        query: (async (text: string, params: unknown[]) => {
          const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
          plan = rows[0]['QUERY PLAN'][0];
          return { rows: [] };
        }) as unknown as Sql['query'],
      } as Sql;
      await claimDueEvents(explaining, [PUSH_STATUS_TOPIC, 'bonus'], 1000, 30000);
      return plan!;
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  }

  /** Rows the plan read from events (not counting the update of the claimed ones). */
  const eventsRead = (plan: PlanNode) =>
    nodes(plan)
      .filter((node) => node['Relation Name'] === 'events' && node['Node Type'] !== 'ModifyTable')
      .reduce((sum, node) => sum + node['Actual Rows']! * node['Actual Loops']!, 0);

  it('claims without a sequential scan of events, reading pending events only, none of 300,000 delivered ones', async () => {
    const old = uniqueName('delivered');
    // Delivered events, committed in chunks (a long transaction would hold back every feed reader).
    for (let chunk = 0; chunk < 10; chunk++) {
      await db.pool.query(
        `INSERT INTO events (id, topic, ordering_key, status, dispatch_state, delivered_at, body)
         SELECT gen_random_uuid(), $1, $2 || '-' || i, 'sent', 'delivered', now(), '{}'::json FROM generate_series(1, 30000) AS i`,
        [PUSH_STATUS_TOPIC, `${old}-${chunk}`],
      );
    }
    const mine = await pushes(db.pool, 20);
    await db.pool.query('ANALYZE events');

    try {
      const plan = await claimPlan();
      expect(nodes(plan.Plan).filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'events')).toEqual([]);
      // Whatever index the planner picks (the partial ones, or another led by dispatch_state), the
      // scans of events read pending events, not the 300,000 delivered ones.
      expect(eventsRead(plan.Plan)).toBeLessThan(5000);
      expect(plan['Execution Time']).toBeLessThan(1000);
    } finally {
      await db.pool.query(`DELETE FROM events WHERE ordering_key LIKE $1 || '-%'`, [old]);
      await db.pool.query(`DELETE FROM events WHERE push_id = ANY($1::uuid[])`, [mine]);
      await db.pool.query(`DELETE FROM messages WHERE brand_id = $1`, [brand]);
    }
  });

  it('claims in one index probe per candidate even when a burst of pending events came after the last ANALYZE', async () => {
    const old = uniqueName('delivered');
    await db.pool.query('ALTER TABLE events SET (autovacuum_enabled = false)');
    try {
      await db.pool.query(
        `INSERT INTO events (id, topic, ordering_key, status, dispatch_state, delivered_at, body)
         SELECT gen_random_uuid(), $1, $2 || '-' || i, 'sent', 'delivered', now(), '{}'::json FROM generate_series(1, 20000) AS i`,
        [PUSH_STATUS_TOPIC, old],
      );
      await db.pool.query('ANALYZE events');
      // The statistics say no event is pending; then a campaign's statuses arrive.
      const burst: string[] = [];
      for (let chunk = 0; chunk < 5; chunk++) burst.push(...(await pushes(db.pool, 1000)));
      try {
        // One probe per candidate: a few thousand rows, where a join reading every pending event
        // for each candidate reads millions.
        expect(eventsRead((await claimPlan()).Plan)).toBeLessThan(20000);
      } finally {
        await db.pool.query(`DELETE FROM events WHERE push_id = ANY($1::uuid[])`, [burst]);
        await db.pool.query(`DELETE FROM messages WHERE brand_id = $1`, [brand]);
      }
    } finally {
      await db.pool.query(`DELETE FROM events WHERE ordering_key LIKE $1 || '-%'`, [old]);
      await db.pool.query('ALTER TABLE events RESET (autovacuum_enabled)');
    }
  });

  it('reads the feed in a read-only transaction, and holds back events behind a transaction still running, never skipping them', async () => {
    const { rows: top } = await db.pool.query<{ top: string }>(`SELECT COALESCE(max(feed_seq), 0)::text AS top FROM events`);
    const after = BigInt(top[0].top);
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
