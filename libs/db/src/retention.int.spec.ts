import { randomInt, randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { closeDb, createDb, type Db, type Sql } from './client';
import { addDays, dayOf, ensurePartitions, partitionName, UNDATED_DAY, type PartitionedTable } from './partitions';
import { claimDeliveries } from './deliveries';
import { storeMessages } from './messages';
import { dropExpiredPartitions, purgeDefaultPartitions, purgeOnce, startRetention, type PurgeOptions } from './retention';

// Against the test database, which other test files use at the same time: every row here is this
// file's own (its brand, its players, its topics), every day partition it makes is a day of its own
// (each test takes the next day further back), and every check looks at those only.

let db: Db;
const brand = randomInt(1_000_000, 2 ** 47);
let crmId = 0;
const player = `retention-${randomUUID().slice(0, 8)}`;
const ids: { messages: string[]; events: string[] } = { messages: [], events: [] };
/** The days this file made partitions for. */
const days: string[] = [];

const DAY_MS = 86_400_000;
const TABLES: PartitionedTable[] = ['deliveries', 'messages', 'events'];
const tablesOf = (day: string) => TABLES.map((table) => partitionName(table, day));
const ago = (days: number) => new Date(Date.now() - days * DAY_MS);

beforeAll(() => {
  db = createDb({ url: process.env.DATABASE_URL! });
});
afterAll(async () => {
  await db.pool.query('DELETE FROM dispatch_retries WHERE event_id = ANY($1::uuid[])', [ids.events]);
  await db.pool.query('DELETE FROM events WHERE id = ANY($1::uuid[]) OR push_id = ANY($2::uuid[])', [ids.events, ids.messages]);
  await db.pool.query('DELETE FROM deliveries WHERE message_id = ANY($1::uuid[])', [ids.messages]);
  await db.pool.query('DELETE FROM messages WHERE brand_id = $1', [brand]);
  for (const day of days) {
    for (const table of tablesOf(day)) await db.pool.query(`DROP TABLE IF EXISTS "${table}"`);
  }
  await closeDb(db);
});

interface EventSpec {
  /**
   * pending: its first try failed, a retry is due; dead: a dead letter; delivered: posted at the
   * first try; unsent: not handed to a dispatcher yet (above its topic's cursor).
   */
  state: 'pending' | 'delivered' | 'dead' | 'unsent';
  at: Date;
  topic?: string;
}

/**
 * An event, of a push (its status event) or on its own (a bonus event), in the state the dispatcher
 * would leave it: its topic's cursor moved past it (so its first try is over), and a row in
 * dispatch_retries for a dead letter or an event still to be posted again. An unsent event is left
 * above the cursor: no other test file moves this file's topics' cursors.
 */
async function event({ state, at, topic = 'push.status' }: EventSpec, pushId?: string): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `WITH e AS (
       INSERT INTO events (id, topic, ordering_key, push_id, status, occurred_at) VALUES ($1, $2, $3, $4, 'sent', $5) RETURNING *),
     moved AS (
       INSERT INTO dispatch_cursors (topic, position) SELECT e.topic, e.feed_seq FROM e WHERE $6 <> 'unsent'
       ON CONFLICT (topic) DO UPDATE SET position = GREATEST(dispatch_cursors.position, EXCLUDED.position))
     INSERT INTO dispatch_retries (event_id, topic, ordering_key, seq, state, attempts, next_attempt_at)
     SELECT e.id, e.topic, e.ordering_key, e.seq, $6::text::"DispatchState", 1, now() + interval '1 hour' FROM e WHERE $6 IN ('pending', 'dead')`,
    [id, topic, pushId ?? `bonus-${id}`, pushId ?? null, at, state],
  );
  ids.events.push(id);
  return id;
}

type DeliveryState = 'pending' | 'sent' | 'failed';

interface MessageSpec {
  /** When it was accepted: a UUIDv7 id of that time puts it in that day's partition. */
  at?: Date;
  /** Accepted before ids were UUIDv7 (a v4 id): it lives in the default partition, `ageDays` old. */
  ageDays?: number;
  status?: 'accepted' | 'sent' | 'failed' | 'delivered' | 'opened' | 'clicked';
  /** Days since its last change; its age by default. */
  changedDaysAgo?: number;
  deliveries?: DeliveryState[];
  /** A push naming a delivery with no final row yet (`open`); by default one written as before pushes named their deliveries (null). */
  open?: true;
  /** Its status events; one posted at its creation by default. */
  events?: { state: EventSpec['state']; ageDays?: number; at?: Date }[];
}

async function message({ at, ageDays = 0, status = 'sent', changedDaysAgo, deliveries = ['sent'], open, events }: MessageSpec) {
  const created = at ?? ago(ageDays);
  const changed = changedDaysAgo === undefined ? created : ago(changedDaysAgo);
  const id = at ? uuidv7({ msecs: at.getTime() }) : randomUUID();
  const acceptedOn = at ? dayOf(at) : UNDATED_DAY;
  crmId += 1;
  await db.pool.query(
    `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers,
                           status, created_at, updated_at, open)
     VALUES ($1, $2, $3, $4, $5, 1, 2, 3, 'th', '{}', '{}', $6::"MessageStatus", $7, $8, $9)`,
    [id, acceptedOn, brand, crmId, player, status, created, changed, open ?? null],
  );
  for (const state of deliveries) {
    await db.pool.query(
      `INSERT INTO deliveries (id, accepted_on, message_id, provider, status, created_at, updated_at, open)
       VALUES ($1, $2, $3, 'fcm', $4::"DeliveryStatus", $5, $5, $6)`,
      [uuidv7({ msecs: created.getTime() }), acceptedOn, id, state, created, state === 'pending' ? true : null],
    );
  }
  const eventIds = [];
  for (const spec of events ?? [{ state: 'delivered' }]) {
    eventIds.push(await event({ state: spec.state, at: spec.at ?? (spec.ageDays === undefined ? created : ago(spec.ageDays)) }, id));
  }
  ids.messages.push(id);
  return { id, events: eventIds };
}

const existing = async (table: 'messages' | 'events', wanted: string[]) =>
  (await db.pool.query<{ id: string }>(`SELECT id FROM ${table} WHERE id = ANY($1::uuid[]) ORDER BY id`, [wanted])).rows.map((row) => row.id).sort();
const deliveriesOf = async (messageIds: string[]) =>
  (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE message_id = ANY($1::uuid[])', [messageIds])).rows[0].n;
const retriesOf = async (eventIds: string[]) =>
  (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM dispatch_retries WHERE event_id = ANY($1::uuid[])', [eventIds])).rows[0].n;

/** Purges the default partitions until a round finds nothing, and answers each round's counts. */
async function drain(options: PurgeOptions) {
  const rounds = [];
  for (let i = 0; i < 1000; i++) {
    const purged = await purgeDefaultPartitions(db.pool, options);
    if (!purged.events && !purged.messages) return rounds;
    rounds.push(purged);
  }
  throw new Error('the purge never ran dry');
}

describe('purgeDefaultPartitions (rows of no day partition)', () => {
  it('purges old settled messages with their deliveries and status events, a batch per statement', async () => {
    const old = await Promise.all(
      (['sent', 'failed', 'delivered', 'opened', 'clicked'] as const).map((status) =>
        message({ ageDays: 40, status, deliveries: ['sent', 'failed'], events: [{ state: 'delivered' }, { state: 'dead' }] }),
      ),
    );
    const rounds = await drain({ retentionDays: 30, batchSize: 2 });
    expect(rounds.every((round) => round.messages <= 2)).toBe(true);
    expect(rounds.filter((round) => round.messages > 0).length).toBeGreaterThanOrEqual(3);
    expect(await existing('messages', old.map((m) => m.id))).toEqual([]);
    expect(await deliveriesOf(old.map((m) => m.id))).toBe(0);
    expect(await existing('events', old.flatMap((m) => m.events))).toEqual([]);
    expect(await retriesOf(old.flatMap((m) => m.events))).toBe(0);
  });

  it('purges delivered and dead events past the retention on their own (bonus events, events of a kept message)', async () => {
    const bonusDelivered = await event({ state: 'delivered', at: ago(31), topic: 'bonus' });
    const bonusDead = await event({ state: 'dead', at: ago(45), topic: 'bonus' });
    const bonusRecentDead = await event({ state: 'dead', at: ago(2), topic: 'bonus' });
    // Opened yesterday: the message stays, its first status event of 40 days ago goes.
    const opened = await message({ ageDays: 40, status: 'opened', changedDaysAgo: 1, events: [{ state: 'delivered' }, { state: 'delivered', ageDays: 1 }] });
    await drain({ retentionDays: 30, batchSize: 2 });
    expect(await existing('events', [bonusDelivered, bonusDead, bonusRecentDead, ...opened.events])).toEqual([bonusRecentDead, opened.events[1]].sort());
    expect(await retriesOf([bonusDead, bonusRecentDead])).toBe(1);
    expect(await existing('messages', [opened.id])).toEqual([opened.id]);
  });

  it('keeps recent messages, accepted ones, ones with a delivery still to send, ones with an event still to post, and every financial record', async () => {
    const kept = [
      await message({ ageDays: 3 }),
      await message({ ageDays: 40, status: 'accepted', deliveries: ['pending'], events: [] }),
      await message({ ageDays: 40, status: 'sent', deliveries: ['sent', 'pending'] }),
      await message({ ageDays: 40, status: 'sent', deliveries: ['sent', 'pending'] }),
      await message({ ageDays: 40, status: 'failed', deliveries: ['failed'], events: [{ state: 'pending' }] }),
      // Sent to one device, another never tried yet (no row).
      await message({ ageDays: 40, status: 'sent', deliveries: ['sent'], open: true }),
    ];
    const pendingBonus = await event({ state: 'pending', at: ago(60), topic: 'bonus' });
    const money = await oldFinancialRecords();

    await drain({ retentionDays: 30, batchSize: 100 });

    expect(await existing('messages', kept.map((m) => m.id))).toEqual(kept.map((m) => m.id).sort());
    expect(await deliveriesOf(kept.map((m) => m.id))).toBe(8);
    expect(await existing('events', [pendingBonus, ...kept[4].events])).toEqual([pendingBonus, ...kept[4].events].sort());
    expect(await money.count()).toEqual({ credits: 1, accounts: 1, ledger_entries: 1, player_bonuses: 1 });
    await money.remove();
  });

  it('with feedOnly, lets pending push statuses (which nobody will post) age out with their messages, but not other pending events', async () => {
    const polled = await message({ ageDays: 40, events: [{ state: 'pending' }] });
    const strayStatus = await event({ state: 'pending', at: ago(40) }, randomUUID());
    const pendingBonus = await event({ state: 'pending', at: ago(60), topic: 'bonus' });
    await drain({ retentionDays: 30, batchSize: 100, feedOnly: true });
    expect(await existing('messages', [polled.id])).toEqual([]);
    expect(await existing('events', [...polled.events, strayStatus, pendingBonus])).toEqual([pendingBonus]);
  });

  it('purges nothing with RETENTION_DAYS=0', async () => {
    const old = await message({ ageDays: 400, events: [{ state: 'delivered' }, { state: 'dead' }] });
    expect(await purgeDefaultPartitions(db.pool, { retentionDays: 0 })).toEqual({ events: 0, messages: 0 });
    expect(await existing('messages', [old.id])).toEqual([old.id]);
    expect(await existing('events', old.events)).toEqual(old.events.sort());
    await drain({ retentionDays: 30 });
    expect(await existing('messages', [old.id])).toEqual([]);
  });

  it('finds what to purge through indexes, not by reading the default partitions', async () => {
    // Enough recent rows in the default partitions (undated pushes, events of a day with no
    // partition) that reading a whole one would cost more than an index.
    const topic = `retention-plan-${randomUUID().slice(0, 8)}`;
    await db.pool.query(
      `INSERT INTO events (id, topic, ordering_key, status, occurred_at)
       SELECT gen_random_uuid(), $1, $1 || i, 'sent', now() - interval '5 days' FROM generate_series(1, 20000) AS i`,
      [topic],
    );
    await db.pool.query(
      `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers, status)
       SELECT gen_random_uuid(), $3, $1, 1000000 + i, $2, 1, 2, 3, 'th', '{}', '{}', 'sent' FROM generate_series(1, 20000) AS i`,
      [brand, player, UNDATED_DAY],
    );
    await db.pool.query('ANALYZE events_default');
    await db.pool.query('ANALYZE messages_default');
    try {
      const plans: string[] = [];
      const explaining = {
        query: async (text: string, params: unknown[]) => {
          const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, params);
          plans.push(rows.map((row) => row['QUERY PLAN']).join('\n'));
          return { rows: [{ events: 0, messages: 0, count: 0 }], rowCount: 0 };
        },
      } as unknown as Sql;
      await purgeDefaultPartitions(explaining, { retentionDays: 30, feedOnly: true });
      expect(plans).toHaveLength(2);
      for (const plan of plans) expect(plan).not.toMatch(/Seq Scan on (messages|events)_default/);
      const [messages, events] = plans;
      expect(messages).toMatch(/Index Scan using messages_default_created_at_idx on messages_default/);
      expect(events).toMatch(/Index Scan using events_default_occurred_at_idx on events_default/);
    } finally {
      await db.pool.query('DELETE FROM events WHERE topic = $1', [topic]);
      await db.pool.query('DELETE FROM messages WHERE brand_id = $1 AND crm_message_id > 1000000', [brand]);
    }
  });
});

/**
 * Each test's own day, further back than any other test's: the days of this file only, older than
 * the rows the tests above leave in the default partitions (a day's partition cannot be made while
 * the default partition holds rows of it).
 */
let daysBack = 100;
async function pastDay(): Promise<{ day: string; at: (hour?: number) => Date }> {
  daysBack += 1;
  const day = dayOf(ago(daysBack));
  days.push(day);
  const made = await ensurePartitions(db.pool, day, day);
  expect(made.created.sort()).toEqual(tablesOf(day).sort());
  return { day, at: (hour = 12) => new Date(Date.parse(`${day}T00:00:00Z`) + hour * 3_600_000) };
}

/** Which of a day's partitions are still in the catalog. */
async function partitionsLeft(day: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ relname: string }>(
    'SELECT relname FROM pg_class WHERE relname = ANY($1::text[]) AND relnamespace = current_schema()::regnamespace ORDER BY relname',
    [tablesOf(day)],
  );
  return rows.map((row) => row.relname);
}

/** Drops what is expired, waiting long for the locks (other test files read these tables meanwhile). */
const drop = (options: PurgeOptions) => dropExpiredPartitions(db.pool, { lockTimeoutMs: 10_000, ...options });
const busyOn = (result: { busy: { day: string; reason: string }[] }, day: string) => result.busy.filter((b) => b.day === day).map((b) => b.reason).sort();

describe('dropExpiredPartitions', () => {
  it('drops a day past the retention whose messages are settled and whose events went through, with the dead letters of its events', async () => {
    const { day, at } = await pastDay();
    const settled = [
      await message({ at: at(1), status: 'delivered', deliveries: ['sent', 'failed'], events: [{ state: 'delivered' }, { state: 'dead' }] }),
      await message({ at: at(23), status: 'failed', deliveries: ['failed'] }),
    ];
    const bonusDelivered = await event({ state: 'delivered', at: at(5), topic: 'bonus' });
    const bonusDead = await event({ state: 'dead', at: at(6), topic: 'bonus' });
    const balance = await event({ state: 'delivered', at: at(7), topic: 'balance' });
    expect(await partitionsLeft(day)).toEqual(tablesOf(day).sort());

    const result = await drop({ retentionDays: 30 });

    expect(result.dropped).toEqual(expect.arrayContaining(tablesOf(day)));
    expect(busyOn(result, day)).toEqual([]);
    expect(await partitionsLeft(day)).toEqual([]);
    expect(await existing('messages', settled.map((m) => m.id))).toEqual([]);
    expect(await deliveriesOf(settled.map((m) => m.id))).toBe(0);
    const events = [...settled.flatMap((m) => m.events), bonusDelivered, bonusDead, balance];
    expect(await existing('events', events)).toEqual([]);
    // The dead letters went with their events' day.
    expect(await retriesOf(events)).toBe(0);
  });

  it('keeps a day with a message still to be sent or a delivery still open, and says why', async () => {
    const accepted = await pastDay();
    const acceptedMessage = await message({ at: accepted.at(), status: 'accepted', deliveries: ['pending'], events: [] });
    const sending = await pastDay();
    const sendingMessage = await message({ at: sending.at(), status: 'sent', deliveries: ['sent', 'pending'] });
    const untried = await pastDay();
    const untriedMessage = await message({ at: untried.at(), status: 'sent', deliveries: ['sent'], open: true });

    const result = await drop({ retentionDays: 30 });

    expect(busyOn(result, accepted.day)).toEqual(['a message still to be sent']);
    expect(busyOn(result, sending.day)).toEqual(['a delivery still open']);
    expect(busyOn(result, untried.day)).toEqual(['a message still to be sent']);
    // Their events went through: their events' partitions go.
    for (const { day } of [accepted, sending]) {
      expect(result.dropped).toContain(partitionName('events', day));
      expect(await partitionsLeft(day)).toEqual([partitionName('deliveries', day), partitionName('messages', day)]);
    }
    expect(await existing('messages', [acceptedMessage.id, sendingMessage.id])).toEqual([acceptedMessage.id, sendingMessage.id].sort());
    expect(await deliveriesOf([acceptedMessage.id, sendingMessage.id])).toBe(3);

    // Once settled, they go.
    await db.pool.query(`UPDATE messages SET status = 'sent' WHERE id = $1`, [acceptedMessage.id]);
    await db.pool.query(`UPDATE messages SET open = NULL WHERE id = $1`, [untriedMessage.id]);
    await db.pool.query(`UPDATE deliveries SET status = 'sent', open = NULL WHERE message_id = ANY($1::uuid[])`, [[acceptedMessage.id, sendingMessage.id]]);
    const after = await drop({ retentionDays: 30 });
    expect(busyOn(after, accepted.day)).toEqual([]);
    expect(busyOn(after, sending.day)).toEqual([]);
    expect(await partitionsLeft(accepted.day)).toEqual([]);
    expect(await partitionsLeft(sending.day)).toEqual([]);
    expect(busyOn(after, untried.day)).toEqual([]);
    expect(await partitionsLeft(untried.day)).toEqual([]);
  });

  it('keeps a day whose pushes have a status event still to be posted (a retry, or not handed out yet), unless the statuses are read from the feed only', async () => {
    const retried = await pastDay();
    // Its status event occurred today, in today's partition: the message's day waits for it.
    const retriedMessage = await message({ at: retried.at(), events: [{ state: 'delivered' }, { state: 'pending', at: new Date() }] });
    const unsent = await pastDay();
    const unsentMessage = await message({ at: unsent.at(), events: [{ state: 'unsent' }] });

    const result = await drop({ retentionDays: 30 });

    expect(busyOn(result, retried.day)).toEqual(['a status event still to be posted']);
    expect(result.dropped).toContain(partitionName('events', retried.day));
    expect(await partitionsLeft(retried.day)).toEqual([partitionName('deliveries', retried.day), partitionName('messages', retried.day)]);
    // The unsent event is in the day's own events partition: that is held too.
    expect(busyOn(result, unsent.day)).toEqual(['a status event still to be posted', 'an event still to be posted']);
    expect(await partitionsLeft(unsent.day)).toEqual(tablesOf(unsent.day).sort());
    expect(await existing('messages', [retriedMessage.id, unsentMessage.id])).toEqual([retriedMessage.id, unsentMessage.id].sort());

    const feedOnly = await drop({ retentionDays: 30, feedOnly: true });
    expect(busyOn(feedOnly, retried.day)).toEqual([]);
    expect(busyOn(feedOnly, unsent.day)).toEqual([]);
    expect(await partitionsLeft(retried.day)).toEqual([]);
    expect(await partitionsLeft(unsent.day)).toEqual([]);
    expect(await existing('messages', [retriedMessage.id, unsentMessage.id])).toEqual([]);
    // The retried event is today's: it stays (the default purge or today's partition sees to it).
    expect(await existing('events', [retriedMessage.events[1]])).toEqual([retriedMessage.events[1]]);
  });

  it('keeps an events day with an event still to be retried, whatever its topic, and its messages day goes', async () => {
    const { day, at } = await pastDay();
    const settled = await message({ at: at() });
    const pendingBonus = await event({ state: 'pending', at: at(3), topic: 'bonus' });

    const result = await drop({ retentionDays: 30 });

    expect(busyOn(result, day)).toEqual(['an event still to be posted']);
    expect(await partitionsLeft(day)).toEqual([partitionName('events', day)]);
    expect(await existing('messages', [settled.id])).toEqual([]);
    expect(await existing('events', [pendingBonus, ...settled.events])).toEqual([pendingBonus, ...settled.events].sort());
    // feedOnly lets only push statuses age out.
    expect(busyOn(await drop({ retentionDays: 30, feedOnly: true }), day)).toEqual(['an event still to be posted']);

    await db.pool.query(`UPDATE dispatch_retries SET state = 'dead' WHERE event_id = $1`, [pendingBonus]);
    expect(busyOn(await drop({ retentionDays: 30 }), day)).toEqual([]);
    expect(await partitionsLeft(day)).toEqual([]);
    expect(await retriesOf([pendingBonus])).toBe(0);
  });

  it('drops a day while the tables are read, without a deadlock for the readers', async () => {
    const { day, at } = await pastDay();
    await message({ at: at() });
    // Queries on the parent tables lock every partition they may read, the parent first: a drop
    // that held a partition before taking the parent would wait for them as they wait for it.
    let dropping = true;
    const readers = Array.from({ length: 6 }, async (_, i) => {
      let reads = 0;
      while (dropping) {
        const table = TABLES[i % TABLES.length];
        await db.pool.query(`SELECT count(*) FROM ${table} WHERE ${table === 'events' ? 'topic' : 'id::text'} = $1`, [player]);
        reads += 1;
      }
      return reads;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const result = await drop({ retentionDays: 30 }).finally(() => (dropping = false));
    const reads = await Promise.all(readers);
    expect(reads.every((n) => n > 0)).toBe(true);
    expect(result.dropped).toEqual(expect.arrayContaining(tablesOf(day)));
    expect(await partitionsLeft(day)).toEqual([]);
  });

  // Statements of the apps that take both parents, in either order: the gateway's acceptance takes
  // messages then deliveries, a send's claim deliveries then messages. Each comes in while the drop
  // waits for a query in flight on the first table it takes.
  const accept = () =>
    storeMessages(db.pool, [
      {
        id: uuidv7(),
        brandId: BigInt(brand),
        crmMessageId: BigInt(randomInt(1, 2 ** 47)),
        userId: `${player}-nobody`,
        activityId: 1n,
        actionGroupId: 2n,
        actionId: 3n,
        triggerHash: 'th',
        origin: null,
        payload: {},
        meta: null,
        crmHeaders: {},
      },
    ]);
  const claim = () => claimDeliveries(db.pool, [uuidv7()], 'fcm', 30_000);
  it.each([
    ['a push accepted', 'deliveries', accept],
    ['a send claimed', 'messages', claim],
  ] as const)('drops a day without a deadlock for %s meanwhile (while a query on %s is in flight)', async (_, inFlight, statement) => {
    const { day, at } = await pastDay();
    await message({ at: at() });
    const reader = await db.pool.connect();
    try {
      await reader.query('BEGIN');
      await reader.query(`SELECT count(*) FROM ${inFlight} WHERE id = $1`, [randomUUID()]);
      const dropping = drop({ retentionDays: 30 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const done = statement();
      await new Promise((resolve) => setTimeout(resolve, 200));
      await reader.query('COMMIT');
      await expect(done).resolves.toBeDefined();
      expect((await dropping).dropped).toEqual(expect.arrayContaining(tablesOf(day)));
    } finally {
      await reader.query('ROLLBACK').catch(() => undefined);
      reader.release();
    }
    expect(await partitionsLeft(day)).toEqual([]);
  });

  it('never drops a day inside the retention, and drops nothing with RETENTION_DAYS=0', async () => {
    const { day, at } = await pastDay();
    const settled = await message({ at: at(), events: [{ state: 'delivered' }, { state: 'dead' }] });
    // The day's end is `daysBack` days ago, give or take: a retention of that many days keeps it
    // until its end is that far behind now.
    const dayEnd = Date.parse(`${addDays(day, 1)}T00:00:00Z`);
    const retentionDays = 20;
    const justInside = await drop({ retentionDays, now: dayEnd + retentionDays * DAY_MS - 1 });
    expect(justInside.dropped.filter((name) => name.endsWith(day.replaceAll('-', '')))).toEqual([]);
    expect(busyOn(justInside, day)).toEqual([]);
    expect(await drop({ retentionDays: daysBack + 10 })).toEqual({ dropped: [], busy: expect.any(Array) });
    expect(await drop({ retentionDays: 0 })).toEqual({ dropped: [], busy: [] });
    expect(await partitionsLeft(day)).toEqual(tablesOf(day).sort());
    expect(await existing('messages', [settled.id])).toEqual([settled.id]);

    const justPast = await drop({ retentionDays, now: dayEnd + retentionDays * DAY_MS });
    expect(justPast.dropped).toEqual(expect.arrayContaining(tablesOf(day)));
    expect(await partitionsLeft(day)).toEqual([]);
  });
});

describe('purgeOnce', () => {
  it('drops the expired days, then purges a batch of the default partitions', async () => {
    const { day, at } = await pastDay();
    const dated = await message({ at: at() });
    const undated = await message({ ageDays: 50 });
    const purged = await purgeOnce(db.pool, { retentionDays: 30, lockTimeoutMs: 10_000 });
    expect(purged.partitions).toEqual(expect.arrayContaining(tablesOf(day)));
    expect(purged.messages).toBeGreaterThanOrEqual(1);
    expect(await existing('messages', [dated.id, undated.id])).toEqual([]);
    expect(await existing('events', [...dated.events, ...undated.events])).toEqual([]);
  });
});

describe('startRetention', () => {
  const recorder = () => {
    const lines: { level: string; message: string; details: object }[] = [];
    const at = (level: string) => (details: object, message: string) => void lines.push({ level, message, details });
    return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
  };

  it('drops the expired days, purges the backlog batch after batch, says what it did, and stops', async () => {
    const { day, at } = await pastDay();
    const dated = await message({ at: at() });
    const old = await Promise.all([1, 2, 3].map(() => message({ ageDays: 50 })));
    const { lines, log } = recorder();
    const retention = startRetention({ db, log, retentionDays: 30, intervalMs: 50, batchSize: 1, lockTimeoutMs: 10_000 });
    const deadline = Date.now() + 10000;
    while ((await existing('messages', [dated.id, ...old.map((m) => m.id)])).length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    while (!lines.some((line) => line.message === 'retention purged old messages and events') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await retention.stop();
    expect(await existing('messages', [dated.id, ...old.map((m) => m.id)])).toEqual([]);
    expect(await partitionsLeft(day)).toEqual([]);
    expect(lines.find((line) => line.message === 'retention dropped day partitions')?.details).toMatchObject({ dropped: expect.arrayContaining(tablesOf(day)) });
    expect(lines.find((line) => line.message === 'retention purged old messages and events')?.details).toMatchObject({ retentionDays: 30 });
  });

  it('does nothing with RETENTION_DAYS=0, and says so', async () => {
    const { day, at } = await pastDay();
    await message({ at: at() });
    const old = await message({ ageDays: 400 });
    const { lines, log } = recorder();
    const retention = startRetention({ db, log, retentionDays: 0, intervalMs: 10 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await retention.stop();
    expect(await existing('messages', [old.id])).toEqual([old.id]);
    expect(await partitionsLeft(day)).toEqual(tablesOf(day).sort());
    expect(lines.map((line) => line.message)).toEqual(['retention is off (RETENTION_DAYS=0): messages and events are kept for ever']);
    await drain({ retentionDays: 30 });
  });
});

/** A completed credit of 90 days ago, with its account, ledger entry and player bonus. */
async function oldFinancialRecords() {
  const credit = randomUUID();
  const account = randomUUID();
  const owner = `${player}-${randomUUID().slice(0, 8)}`;
  const old = ago(90);
  await db.pool.query(
    `INSERT INTO credits (id, idempotency_key, kind, fingerprint, user_id, bonus_code, amount_minor, currency, type, request, crm_headers, status, created_at, updated_at)
     VALUES ($1, $4, 'bonus', 'test', $2, 'WELCOME100', 1000, 'EUR', 'WelcomeBonus', '{}', '{}', 'completed', $3, $3)`,
    [credit, owner, old, `retention-${credit}`],
  );
  await db.pool.query(`INSERT INTO accounts (id, owner, currency, kind, balance_minor, created_at) VALUES ($1, $2, 'EUR', 'bonus_money', 1000, $3)`, [account, owner, old]);
  await db.pool.query(
    `INSERT INTO ledger_entries (id, transaction_id, account_id, amount_minor, reason, created_at) VALUES (gen_random_uuid(), gen_random_uuid(), $1, 1000, 'credit', $2)`,
    [account, old],
  );
  await db.pool.query(
    `INSERT INTO player_bonuses (id, credit_id, user_id, bonus_code, type, product, amount_minor, currency, required_wagering_minor, status, expires_at, created_at, updated_at)
     VALUES (gen_random_uuid(), $1, $2, 'WELCOME100', 'WelcomeBonus', 'Casino', 1000, 'EUR', 35000, 'Completed', $3, $3, $3)`,
    [credit, owner, old],
  );
  return {
    async count() {
      const { rows } = await db.pool.query(
        `SELECT (SELECT count(*) FROM credits WHERE id = $1)::int AS credits, (SELECT count(*) FROM accounts WHERE id = $2)::int AS accounts,
                (SELECT count(*) FROM ledger_entries WHERE account_id = $2)::int AS ledger_entries,
                (SELECT count(*) FROM player_bonuses WHERE credit_id = $1)::int AS player_bonuses`,
        [credit, account],
      );
      return rows[0];
    },
    async remove() {
      await db.pool.query('DELETE FROM player_bonuses WHERE credit_id = $1', [credit]);
      await db.pool.query('DELETE FROM ledger_entries WHERE account_id = $1', [account]);
      await db.pool.query('DELETE FROM accounts WHERE id = $1', [account]);
      await db.pool.query('DELETE FROM credits WHERE id = $1', [credit]);
    },
  };
}
