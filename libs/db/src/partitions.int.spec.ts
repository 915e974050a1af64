import { randomInt, randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { closeDb, createDb, type Db } from './client';
import { addDays, ensurePartitions, listPartitions, partitionName, startPartitionKeeper, UNDATED_DAY, uuidV7Day, type PartitionedTable } from './partitions';

// Against the test database, which other test files use at the same time: each test makes the
// partitions of days of its own, years ahead (no other test writes rows of those days, and the
// retention only looks at days past), and drops them at the end.

let db: Db;
const made = new Set<string>();
const TABLES: PartitionedTable[] = ['deliveries', 'events', 'messages'];
const DAY_MS = 86_400_000;

beforeAll(() => {
  db = createDb({ url: process.env.DATABASE_URL! });
});
afterAll(async () => {
  for (const name of made) await db.pool.query(`DROP TABLE IF EXISTS "${name}"`);
  await closeDb(db);
});

/** The partitions of the days from `from` through `to`, by name, in name order. */
function partitionsOf(from: string, to: string): string[] {
  const names = [];
  for (let day = from; day <= to; day = addDays(day, 1)) names.push(...TABLES.map((table) => partitionName(table, day)));
  for (const name of names) made.add(name);
  return names.sort();
}

/** Which of these tables exist. */
async function existing(names: string[]): Promise<string[]> {
  const { rows } = await db.pool.query<{ relname: string }>(
    'SELECT relname FROM pg_class WHERE relname = ANY($1::text[]) AND relnamespace = current_schema()::regnamespace ORDER BY relname',
    [names],
  );
  return rows.map((row) => row.relname);
}

/** The partition a message of day `day` goes to, found by inserting one (then deleted). */
async function partitionOfMessage(day: string): Promise<string> {
  const id = randomUUID();
  const { rows } = await db.pool.query<{ partition: string }>(
    `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers)
     VALUES ($1, $2, $3, 1, 'partitions', 1, 2, 3, 'th', '{}', '{}') RETURNING tableoid::regclass::text AS partition`,
    [id, day, randomInt(1_000_000, 2 ** 47)],
  );
  await db.pool.query('DELETE FROM messages WHERE id = $1 AND accepted_on = $2', [id, day]);
  return rows[0].partition;
}

describe('ensurePartitions', () => {
  it("makes the missing partitions of each table for each day of a range, rows of each day go to their day's, and a second call makes nothing", async () => {
    const wanted = partitionsOf('2033-03-01', '2033-03-03');
    expect(await existing(wanted)).toEqual([]);

    const first = await ensurePartitions(db.pool, '2033-03-01', '2033-03-03');

    expect(first.created.sort()).toEqual(wanted);
    expect(first.skipped).toEqual([]);
    expect(await existing(wanted)).toEqual(wanted);
    const listed = (await listPartitions(db.pool)).filter((p) => wanted.includes(p.name));
    expect(listed.map(({ table, day }) => `${table} ${day}`).sort()).toEqual(
      TABLES.flatMap((table) => ['2033-03-01', '2033-03-02', '2033-03-03'].map((day) => `${table} ${day}`)).sort(),
    );
    // The bounds: a day's first and last instants (UTC) are in its partition.
    expect(await partitionOfMessage('2033-03-02')).toBe('messages_p20330302');
    const { rows } = await db.pool.query<{ id: string; partition: string }>(
      `INSERT INTO events (id, topic, ordering_key, status, occurred_at)
       VALUES (gen_random_uuid(), 'partitions-test', 'a', 'sent', '2033-03-01 00:00:00+00'), (gen_random_uuid(), 'partitions-test', 'b', 'sent', '2033-03-03 23:59:59.999+00')
       RETURNING id, tableoid::regclass::text AS partition`,
    );
    await db.pool.query('DELETE FROM events WHERE id = ANY($1::uuid[])', [rows.map((row) => row.id)]);
    expect(rows.map((row) => row.partition)).toEqual(['events_p20330301', 'events_p20330303']);

    const again = await ensurePartitions(db.pool, '2033-03-01', '2033-03-03');
    expect(again).toEqual({ created: [], skipped: [] });
  });

  it('lets two apps make the same days at once: each partition is made once, and neither fails', async () => {
    const wanted = partitionsOf('2034-01-01', '2034-01-05');
    const [a, b] = await Promise.all([ensurePartitions(db.pool, '2034-01-01', '2034-01-05'), ensurePartitions(db.pool, '2034-01-01', '2034-01-05')]);
    expect([...a.created, ...b.created].sort()).toEqual(wanted);
    expect([...a.skipped, ...b.skipped]).toEqual([]);
    expect(await existing(wanted)).toEqual(wanted);
  });

  it('leaves half of each page free in the messages and deliveries partitions', async () => {
    const wanted = partitionsOf('2034-02-01', '2034-02-01');
    await ensurePartitions(db.pool, '2034-02-01', '2034-02-01');
    const { rows } = await db.pool.query<{ relname: string; reloptions: string[] | null }>(
      'SELECT relname, reloptions FROM pg_class WHERE relname = ANY($1::text[]) AND relnamespace = current_schema()::regnamespace ORDER BY relname',
      [wanted],
    );
    expect(rows).toEqual([
      { relname: 'deliveries_p20340201', reloptions: ['fillfactor=50'] },
      { relname: 'events_p20340201', reloptions: null },
      { relname: 'messages_p20340201', reloptions: ['fillfactor=50'] },
    ]);
  });

  it('sends the rows of a day without a partition to the default partition, and then leaves that day out (skipped, not thrown)', async () => {
    const day = '2035-06-15';
    const wanted = partitionsOf(day, day);
    const id = randomUUID();
    const { rows } = await db.pool.query<{ partition: string }>(
      `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers)
       VALUES ($1, $2, $3, 1, 'partitions', 1, 2, 3, 'th', '{}', '{}') RETURNING tableoid::regclass::text AS partition`,
      [id, day, randomInt(1_000_000, 2 ** 47)],
    );
    expect(rows[0].partition).toBe('messages_default');
    try {
      const result = await ensurePartitions(db.pool, day, day);
      expect(result.created.sort()).toEqual(['deliveries_p20350615', 'events_p20350615']);
      expect(result.skipped).toEqual([{ name: 'messages_p20350615', reason: 'rows of that day are in the default partition' }]);
      expect(await existing(wanted)).toEqual(['deliveries_p20350615', 'events_p20350615']);
    } finally {
      await db.pool.query('DELETE FROM messages WHERE id = $1 AND accepted_on = $2', [id, day]);
    }
    // Once the default partition holds no row of that day, the partition is made.
    expect((await ensurePartitions(db.pool, day, day)).created).toEqual(['messages_p20350615']);
    expect(await partitionOfMessage(day)).toBe('messages_p20350615');
  });
});

describe('uuidV7Day', () => {
  it('answers the day uuid_v7_day() answers in SQL, for UUIDv7 ids of any time and around midnight, and 1970-01-01 for other ids', async () => {
    const times: number[] = [0, 1, DAY_MS - 1, DAY_MS];
    for (let i = 0; i < 200; i++) times.push(randomInt(0, Date.parse('9999-12-31T00:00:00Z') / 1000) * 1000 + randomInt(1000));
    for (let i = 0; i < 50; i++) {
      const midnight = Date.parse(`${addDays('2026-11-26', randomInt(-3000, 3000))}T00:00:00Z`);
      times.push(midnight - 1, midnight, midnight + 1);
    }
    const ids = times.map((msecs) => uuidv7({ msecs }));
    const others = [randomUUID(), randomUUID().toUpperCase(), '00000000-0000-0000-0000-000000000000'];
    const { rows } = await db.pool.query<{ id: string; day: string }>(
      `SELECT i.id::text, uuid_v7_day(i.id)::text AS day FROM unnest($1::uuid[]) WITH ORDINALITY AS i(id, n) ORDER BY i.n`,
      [[...ids, ...others]],
    );
    expect(rows.map((row) => row.day)).toEqual([...ids, ...others].map(uuidV7Day));
    expect(others.map(uuidV7Day)).toEqual([UNDATED_DAY, UNDATED_DAY, UNDATED_DAY]);
    expect(uuidV7Day(uuidv7({ msecs: Date.parse('2026-11-26T23:59:59.999Z') }))).toBe('2026-11-26');
    expect(uuidV7Day(uuidv7({ msecs: Date.parse('2026-11-27T00:00:00.000Z') }))).toBe('2026-11-27');
  });
});

describe('startPartitionKeeper', () => {
  it('makes the partitions from yesterday through a week ahead at its first look', async () => {
    // A today of its own, years ahead, so that no other test's days are in its range.
    const today = '2031-05-10';
    const wanted = partitionsOf(addDays(today, -1), addDays(today, 7));
    expect(await existing(wanted)).toEqual([]);
    const lines: { message: string; details: object }[] = [];
    const record = (details: object, message: string) => void lines.push({ message, details });
    const keeper = startPartitionKeeper({ db, log: { info: record, warn: record, error: record }, now: () => Date.parse(`${today}T12:00:00Z`) });
    try {
      await keeper.firstLook;
      expect(await existing(wanted)).toEqual(wanted);
      expect(await existing(partitionsOf(addDays(today, -2), addDays(today, -2)))).toEqual([]);
      expect(await existing(partitionsOf(addDays(today, 8), addDays(today, 8)))).toEqual([]);
    } finally {
      await keeper.stop();
    }
    const created = lines.find((line) => line.message === 'day partitions created');
    expect((created?.details as { created: string[] }).created.sort()).toEqual(wanted);
  });
});
