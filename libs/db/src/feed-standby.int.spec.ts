import pg from 'pg';
import { migratedPairDatabase, seededRandom, startPostgresPair, until, type PostgresPair } from '@operator/testing';
import { PUSH_STATUS_TOPIC, readPushFeed } from './feed';

// Needs the PostgreSQL 15 binaries. The polling feed read from a hot standby (DATABASE_READ_URL)
// keeps its promise: a cursor never passes an event that shows up later. The feed answers only
// events below the snapshot's xmin; on a standby the snapshot comes from the WAL replayed so far:
// every transaction id the standby has seen used, and every id below one it has seen (the primary
// hands them out in order), counts as running until its commit or abort is replayed, or until a
// running-transactions record (a checkpoint, or every 15 s) says it has ended. So a transaction
// the standby knows nothing of yet sits at or above its horizon, and so do its events.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One push and its status event, written by `client` (in its transaction, if it has one open). */
async function writeEvent(client: pg.Pool | pg.PoolClient, n: number): Promise<void> {
  await client.query(
    `WITH m AS (
       INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers)
       VALUES (gen_random_uuid(), DATE '1970-01-01', 1, $1, 'p-1', 55, 2, 3, 'th', '{}', '{}') RETURNING id)
     INSERT INTO events (id, topic, ordering_key, push_id, status) SELECT gen_random_uuid(), $2, m.id::text, m.id, 'sent' FROM m`,
    [n, PUSH_STATUS_TOPIC],
  );
}

/** Every status event of the database in feed order, read without the horizon: what has been committed. */
async function committedFeed(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ seq: string }>('SELECT feed_seq::text AS seq FROM events WHERE topic = $1 ORDER BY feed_seq', [PUSH_STATUS_TOPIC]);
  return rows.map((row) => row.seq);
}

const eventCount = async (pool: pg.Pool) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events')).rows[0].n;

/** Waits until the standby has replayed everything the primary has written so far. */
async function caughtUp(primary: pg.Pool, standby: pg.Pool): Promise<void> {
  const { lsn } = (await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0];
  await until(
    async () => (await standby.query<{ done: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [lsn])).rows[0].done,
    'the standby to replay the primary’s WAL',
    20000,
  );
}

/** A poller of the feed on one server: its cursor, and every event it was answered, in order. */
function poller(pool: pg.Pool) {
  let cursor = 0n;
  const seen: string[] = [];
  const counts = { polls: 0, held: 0 };
  return {
    seen,
    counts,
    async poll() {
      const page = await readPushFeed(pool, cursor, 1000);
      counts.polls += 1;
      if (page.held) counts.held += 1;
      for (const row of page.rows) {
        // Each page goes on from the cursor, in order.
        expect(BigInt(row.feedSeq)).toBeGreaterThan(cursor);
        cursor = BigInt(row.feedSeq);
        seen.push(row.feedSeq);
      }
      // The next page starts where this one says, as the CRM's does (next_cursor).
      expect(page.next).toBe(cursor.toString());
      return page;
    },
  };
}

describe('the events feed read from a hot standby', () => {
  let pair: PostgresPair;
  let primary: pg.Pool;
  let standby: pg.Pool;
  const pools: pg.Pool[] = [];
  const poolFor = (url: string, max = 4) => {
    const pool = new pg.Pool({ connectionString: url, max });
    pool.on('error', () => undefined);
    pools.push(pool);
    return pool;
  };

  beforeAll(async () => {
    pair = await startPostgresPair();
    const urls = await migratedPairDatabase(pair, 'feed');
    primary = poolFor(urls.primaryUrl, 12);
    standby = poolFor(urls.standbyUrl);
  }, 120000);
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
    await pair?.stop();
  });
  beforeEach(async () => {
    await primary.query('TRUNCATE events, messages CASCADE');
    await caughtUp(primary, standby);
  });

  it('puts a commit the standby has not replayed at or above the standby’s horizon', async () => {
    await writeEvent(primary, 1);
    await caughtUp(primary, standby);
    await standby.query('SELECT pg_wal_replay_pause()');
    try {
      await writeEvent(primary, 2);
      const [, unreplayed] = await committedFeed(primary);
      const { horizon } = (await standby.query<{ horizon: string }>('SELECT events_feed_base(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)::text AS horizon')).rows[0];
      expect(BigInt(unreplayed)).toBeGreaterThanOrEqual(BigInt(horizon));
      expect(await eventCount(standby)).toBe(1);
      // The standby answers the one it has, and nothing behind which the other could land.
      const page = await readPushFeed(standby, 0n, 100);
      expect(page.rows.map((row) => row.feedSeq)).toEqual((await committedFeed(primary)).slice(0, 1));
    } finally {
      await standby.query('SELECT pg_wal_replay_resume()');
    }
  });

  it('holds back what a late commit would land behind, though that transaction wrote nothing yet, also past a checkpoint', async () => {
    const reader = poller(standby);
    for (let n = 1; n <= 3; n += 1) await writeEvent(primary, n);
    await caughtUp(primary, standby);
    await reader.poll();
    expect(reader.seen).toHaveLength(3);

    // The late transaction takes its id first and writes no WAL with it: the standby learns of it
    // only from the ids after it.
    const late = await primary.connect();
    let naiveCursor: bigint;
    try {
      await late.query('BEGIN');
      await late.query('SELECT pg_current_xact_id()');
      await writeEvent(primary, 4);
      await writeEvent(primary, 5);
      await caughtUp(primary, standby);
      expect(await eventCount(standby)).toBe(5);

      // What a reader without the horizon would answer: both, and its cursor past the late one.
      const naive = await standby.query<{ seq: string }>('SELECT feed_seq::text AS seq FROM events WHERE topic = $1 AND feed_seq > $2 ORDER BY feed_seq', [PUSH_STATUS_TOPIC, reader.seen[2]]);
      expect(naive.rows).toHaveLength(2);
      naiveCursor = BigInt(naive.rows[1].seq);

      expect(await reader.poll()).toMatchObject({ rows: [], held: true });
      // A checkpoint logs the transactions running on the primary; replayed, the late one is still among them.
      await primary.query('CHECKPOINT');
      await caughtUp(primary, standby);
      expect(await reader.poll()).toMatchObject({ rows: [], held: true });

      await writeEvent(late, 6);
      await late.query('COMMIT');
    } finally {
      late.release();
    }
    await caughtUp(primary, standby);
    await reader.poll();

    const all = await committedFeed(primary);
    expect(all).toHaveLength(6);
    expect(reader.seen).toEqual(all);
    // The late event sits before the two committed ahead of it: the naive cursor had passed it.
    expect(BigInt(all[3])).toBeLessThan(naiveCursor);
  });

  it('never skips an event while writers commit in any order and a poller reads the standby (seeded)', async () => {
    const seed = Number(process.env.FEED_STANDBY_SEED ?? Date.now() % 100000);
    const random = seededRandom(seed);
    const reader = poller(standby);
    const WRITERS = 8;
    const PER_WRITER = 25;

    // Each writer's transactions take their id at once, then wait a random while (some long)
    // before they write, and again before they commit; a few roll back.
    const writer = async (w: number) => {
      for (let i = 0; i < PER_WRITER; i += 1) {
        const client = await primary.connect();
        try {
          await client.query('BEGIN');
          if (random.chance(0.5)) await client.query('SELECT pg_current_xact_id()');
          await sleep(random.chance(0.1) ? random.int(100, 400) : random.int(0, 10));
          await writeEvent(client, w * 1000 + i);
          if (random.chance(0.2)) await writeEvent(client, w * 1000 + 500 + i);
          await sleep(random.int(0, 20));
          await client.query(random.chance(0.1) ? 'ROLLBACK' : 'COMMIT');
        } finally {
          client.release();
        }
      }
    };
    let writing = true;
    const checkpoints = (async () => {
      while (writing) {
        await sleep(300);
        await primary.query('CHECKPOINT');
      }
    })();
    const reading = (async () => {
      while (writing) {
        await reader.poll();
        await sleep(5);
      }
    })();
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    writing = false;
    await Promise.all([checkpoints, reading]);

    await caughtUp(primary, standby);
    const all = await committedFeed(primary);
    // Read to the end: a page with nothing held back and nothing in it.
    await until(async () => {
      const page = await reader.poll();
      return !page.held && !page.rows.length;
    }, `the feed on the standby to drain (seed ${seed})`, 20000);
    // Every event once, in feed order: a skipped one would be missing here, as its cursor had passed it.
    expect({ seed, seen: reader.seen }).toEqual({ seed, seen: all });
    // And the run did have the standby hold pages back for transactions still open.
    expect(reader.counts.held).toBeGreaterThan(0);
  }, 120000);
});
