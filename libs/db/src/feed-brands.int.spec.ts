import { setTimeout as sleep } from 'node:timers/promises';
import { v7 as uuidv7 } from 'uuid';
import { feedTop, uniqueBrandId } from '@operator/testing';
import { closeDb, createDb, type Db, type Sql } from './client';
import { PUSH_STATUS_TOPIC, readPushFeed } from './feed';

// The polling feed kept to a credential's brands: each page answers only their events, and its
// cursor passes over other brands' events once, never skipping one of its own nor answering one twice.

describe('the push feed of some brands (PostgreSQL)', () => {
  let db: Db;
  let mine: string;
  let other: string;
  let crmIds = 0;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
  });
  afterAll(() => closeDb(db));
  beforeEach(() => {
    mine = String(uniqueBrandId());
    other = String(uniqueBrandId());
  });

  /** One push with a `sent` event per brand given, the events in that order; answers the push ids. */
  async function events(sql: Sql, brands: string[]): Promise<string[]> {
    const ids = brands.map(() => uuidv7());
    const first = (crmIds += brands.length) - brands.length;
    await sql.query(
      `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, meta, crm_headers, status)
       SELECT u.id, uuid_v7_day(u.id), u.brand, $3::bigint + u.n, 'player', 1, 2, 3, 'th-' || u.n, '{}'::json, '{}'::json, '{}'::jsonb, 'sent'
         FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS u(id, brand, n)`,
      [ids, brands, first + process.pid * 100000],
    );
    await sql.query(
      `INSERT INTO events (id, topic, ordering_key, push_id, status)
       SELECT gen_random_uuid(), $2, u.id::text, u.id, 'sent' FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n) ORDER BY u.n`,
      [ids, PUSH_STATUS_TOPIC],
    );
    return ids;
  }

  /** Brand `mine` and `other` interleaved, with runs of the other brand longer than a small scan. */
  function interleaved(): string[] {
    const pattern = ['m', 'o', 'o', 'm', 'm', 'o', ...Array(25).fill('o'), 'm', 'o', 'm', 'm', 'm', ...Array(9).fill('o'), 'm', 'o', 'o', 'o', 'm', 'm', 'o'];
    return pattern.map((brand) => (brand === 'm' ? mine : other));
  }

  /**
   * Pages the feed from `after` with `brands` until `expected` events of it were answered and the
   * cursor stands still; answers the push ids in the order answered, and the pages read.
   */
  async function page(after: bigint, brands: string[] | null, limit: number, expected: number, scanRows?: number) {
    const seen: string[] = [];
    const pages: { rows: number; from: bigint; next: bigint }[] = [];
    let cursor = after;
    for (let reads = 0; reads < 500; reads++) {
      const read = await readPushFeed(db.pool, cursor, limit, brands, scanRows);
      const next = BigInt(read.next);
      expect(next >= cursor).toBe(true);
      expect(read.rows.length).toBeLessThanOrEqual(limit);
      // Each answered event is after the cursor and no later than the next one.
      for (const row of read.rows) expect(BigInt(row.feedSeq) > cursor && BigInt(row.feedSeq) <= next).toBe(true);
      seen.push(...read.rows.map((row) => row.pushId));
      pages.push({ rows: read.rows.length, from: cursor, next });
      if (seen.length >= expected && next === cursor) return { seen, pages };
      // Another spec's transaction still running holds the feed back: wait for it.
      if (next === cursor) await sleep(10);
      cursor = next;
    }
    throw new Error(`the feed did not settle: ${seen.length} of ${expected} events answered`);
  }

  /** The pushes of `ids` answered, in the order answered (other specs write events of their own meanwhile). */
  const only = (seen: string[], ids: string[]) => seen.filter((id) => ids.includes(id));

  it.each([1, 2, 3, 7, 100])('answers a credential of one brand each of its events once, in order, and none of another, %i a page', async (limit) => {
    const after = await feedTop(db.pool);
    const brands = interleaved();
    const ids = await events(db.pool, brands);
    const own = ids.filter((_, i) => brands[i] === mine);

    const { seen } = await page(after, [mine], limit, own.length);

    expect(seen).toEqual(own);
  });

  it('passes over runs of other brands longer than the rows a page reads, without skipping or repeating', async () => {
    const after = await feedTop(db.pool);
    const brands = interleaved();
    const ids = await events(db.pool, brands);
    const own = ids.filter((_, i) => brands[i] === mine);

    const { seen, pages } = await page(after, [mine], 3, own.length, 5);

    expect(seen).toEqual(own);
    // Some pages read only other brands' events: they answered none and moved the cursor past them.
    expect(pages.some((read) => read.rows === 0 && read.next > read.from)).toBe(true);
    // A page reads at most 5 events, so passing 25 of the other brand takes several pages.
    expect(pages.length).toBeGreaterThan(own.length / 3 + 5);
  });

  it('answers a credential of two brands both, and one of no brand nothing while its cursor moves on', async () => {
    const after = await feedTop(db.pool);
    const third = String(uniqueBrandId());
    const brands = [mine, third, other, mine, other, third, other];
    const ids = await events(db.pool, brands);

    const both = await page(after, [mine, other], 2, 5, 3);
    expect(only(both.seen, ids)).toEqual(ids.filter((_, i) => brands[i] !== third));
    expect(only(both.seen, ids)).toEqual(both.seen.filter((id) => ids.includes(id)));

    const none = await readPushFeed(db.pool, after, 10, []);
    expect(none.rows).toEqual([]);
    expect(BigInt(none.next) >= after).toBe(true);
  });

  it('reads every brand as before when the credential opens every brand', async () => {
    const after = await feedTop(db.pool);
    const brands = interleaved();
    const ids = await events(db.pool, brands);

    const { seen } = await page(after, null, 4, ids.length);

    expect(only(seen, ids)).toEqual(ids);
    const first = await readPushFeed(db.pool, after, 4);
    expect(first.next).toBe(first.rows[first.rows.length - 1].feedSeq);
  });

  it('never passes an event of a transaction still running, of its brand or another', async () => {
    const after = await feedTop(db.pool);
    const slow = await db.pool.connect();
    try {
      await slow.query('BEGIN');
      // The slow transaction writes its events first (smaller positions) and commits last.
      const late = await events(slow, [other, mine]);
      const early = await events(db.pool, [mine, other, mine]);

      const during = await readPushFeed(db.pool, after, 10, [mine], 5);
      expect(only(during.rows.map((row) => row.pushId), [...late, ...early])).toEqual([]);
      expect(during.held).toBe(true);
      // (Seen from inside: the events are not visible outside until it commits.)
      const lateSeq = (await slow.query<{ seq: string }>(`SELECT min(feed_seq)::text AS seq FROM events WHERE push_id = ANY($1::uuid[])`, [late])).rows[0];
      // Nothing committed while it runs: the cursor stays before its first event.
      expect(BigInt(during.next) < BigInt(lateSeq.seq)).toBe(true);

      await slow.query('COMMIT');
      const { seen } = await page(BigInt(during.next), [mine], 1, 3, 5);
      expect(only(seen, [...late, ...early])).toEqual([late[1], early[0], early[2]]);
    } finally {
      await slow.query('ROLLBACK').catch(() => undefined);
      slow.release();
    }
  });
});
