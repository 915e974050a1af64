import { execFileSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { startPostgresPair, until, type PostgresPair } from '@operator/testing';
import { PUSH_STATUS_TOPIC, readPushFeed } from './feed';

// The polling feed across a failover after asynchronous replication: the standby misses the old
// primary's last transactions, and once promoted hands out transaction ids again from where its
// replay ended. A poller's cursor taken from one of those lost events must not hide the events the
// new primary writes.

const root = path.join(__dirname, '../../..');

function migrate(url: string): void {
  execFileSync(process.execPath, ['--input-type=module', '-e', `import { migrate } from './tools/db-migrate.mjs'; migrate(${JSON.stringify(url)});`], {
    cwd: root,
    stdio: 'ignore',
  });
}

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/** One push and its status event, in a transaction of their own. */
async function writeEvent(pool: pg.Pool, n: number): Promise<void> {
  await pool.query(
    `WITH m AS (
       INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers)
       VALUES (gen_random_uuid(), DATE '1970-01-01', 1, $1, 'p-1', 55, 2, 3, 'th', '{}', '{}') RETURNING id)
     INSERT INTO events (id, topic, ordering_key, push_id, status) SELECT gen_random_uuid(), $2, m.id::text, m.id, 'sent' FROM m`,
    [n, PUSH_STATUS_TOPIC],
  );
}

async function feedAfter(pool: pg.Pool, after: bigint): Promise<string[]> {
  const page = await readPushFeed(pool, after, 1000);
  return page.rows.map((row) => row.feedSeq);
}

describe('the events feed across a PostgreSQL failover', () => {
  let pair: PostgresPair;
  const pools: pg.Pool[] = [];
  const poolFor = (url: string) => {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    pool.on('error', () => undefined);
    pools.push(pool);
    return pool;
  };

  beforeAll(async () => {
    pair = await startPostgresPair();
  }, 120000);
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
    await pair?.stop();
  });

  it('never puts the new primary’s events behind a cursor read on the old one', async () => {
    const admin = poolFor(pair.primaryUrl);
    await admin.query('CREATE DATABASE feed');
    const primaryUrl = withDatabase(pair.primaryUrl, 'feed');
    migrate(primaryUrl);
    const primary = poolFor(primaryUrl);
    for (let n = 1; n <= 3; n += 1) await writeEvent(primary, n);
    const standby = poolFor(withDatabase(pair.standbyUrl, 'feed'));
    await until(async () => (await standby.query('SELECT count(*)::int AS n FROM events')).rows[0].n === 3, 'the standby to replay the first events', 20000);

    // The standby stops receiving: what the primary writes from now on is lost at the failover.
    await standby.query("ALTER SYSTEM SET primary_conninfo = ''");
    await standby.query('SELECT pg_reload_conf()');
    await until(async () => (await standby.query('SELECT count(*)::int AS n FROM pg_stat_wal_receiver')).rows[0].n === 0, 'the standby to stop streaming', 20000);
    for (let n = 4; n <= 40; n += 1) await writeEvent(primary, n);
    const read = await feedAfter(primary, 0n);
    expect(read).toHaveLength(40);
    const cursor = BigInt(read[read.length - 1]);

    await pair.stopPrimary('immediate');
    await pair.promote();
    const promoted = poolFor(withDatabase(pair.standbyUrl, 'feed'));
    expect((await promoted.query('SELECT count(*)::int AS n FROM events')).rows[0].n).toBe(3);
    await writeEvent(promoted, 41);
    await writeEvent(promoted, 42);

    // The new primary reuses the lost transactions' ids, yet its events come after the cursor.
    const after = await feedAfter(promoted, cursor);
    expect(after).toHaveLength(2);
    expect(after.every((seq) => BigInt(seq) > cursor)).toBe(true);
    // And after every event that survived, in order.
    const all = await feedAfter(promoted, 0n);
    expect(all).toHaveLength(5);
    expect(all.slice(3)).toEqual(after);
  }, 120000);
});
