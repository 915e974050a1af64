import { randomInt, randomUUID } from 'node:crypto';
import { closeDb, createDb, type Db, type Sql } from './client';
import { purgeOnce, startRetention, type PurgeOptions } from './retention';

// Against the test database, which other test files use at the same time: every row here is this
// file's own (its brand, its players, its topics), and every check looks at those rows only.

let db: Db;
const brand = randomInt(1_000_000, 2 ** 47);
let crmId = 0;
const player = `retention-${randomUUID().slice(0, 8)}`;
const ids: { messages: string[]; events: string[] } = { messages: [], events: [] };

beforeAll(() => {
  db = createDb({ url: process.env.DATABASE_URL! });
});
afterAll(async () => {
  await db.pool.query('DELETE FROM dispatch_retries WHERE event_id = ANY($1::uuid[])', [ids.events]);
  await db.pool.query('DELETE FROM events WHERE id = ANY($1::uuid[]) OR push_id = ANY($2::uuid[])', [ids.events, ids.messages]);
  await db.pool.query('DELETE FROM messages WHERE brand_id = $1', [brand]);
  await closeDb(db);
});

const ago = (days: number) => new Date(Date.now() - days * 86_400_000);

interface EventSpec {
  state: 'pending' | 'delivered' | 'dead';
  ageDays: number;
  topic?: string;
}

/**
 * An event, of a push (its status event) or on its own (a bonus event), in the state the dispatcher
 * would leave it: its topic's cursor moved past it (so its first try is over), and a row in
 * dispatch_retries for a dead letter or an event still to be posted again.
 */
async function event({ state, ageDays, topic = 'push.status' }: EventSpec, pushId?: string): Promise<string> {
  const id = randomUUID();
  await db.pool.query(
    `WITH e AS (
       INSERT INTO events (id, topic, ordering_key, push_id, status, occurred_at) VALUES ($1, $2, $3, $4, 'sent', $5) RETURNING *),
     moved AS (
       INSERT INTO dispatch_cursors (topic, position) SELECT e.topic, e.feed_seq FROM e
       ON CONFLICT (topic) DO UPDATE SET position = GREATEST(dispatch_cursors.position, EXCLUDED.position))
     INSERT INTO dispatch_retries (event_id, topic, ordering_key, seq, state, attempts, next_attempt_at)
     SELECT e.id, e.topic, e.ordering_key, e.seq, $6::"DispatchState", 1, now() + interval '1 hour' FROM e WHERE $6 <> 'delivered'`,
    [id, topic, pushId ?? `bonus-${id}`, pushId ?? null, ago(ageDays), state],
  );
  ids.events.push(id);
  return id;
}

interface MessageSpec {
  ageDays: number;
  status?: 'accepted' | 'sent' | 'failed' | 'delivered' | 'opened' | 'clicked';
  /** Days since its last change; its age by default. */
  changedDaysAgo?: number;
  deliveries?: ('pending' | 'sending' | 'sent' | 'failed')[];
  events?: EventSpec[];
}

async function message({ ageDays, status = 'sent', changedDaysAgo = ageDays, deliveries = ['sent'], events = [{ state: 'delivered', ageDays }] }: MessageSpec) {
  const id = randomUUID();
  crmId += 1;
  await db.pool.query(
    `INSERT INTO messages (id, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers,
                           status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 1, 2, 3, 'th', '{}', '{}', $5::"MessageStatus", $6, $7)`,
    [id, brand, crmId, player, status, ago(ageDays), ago(changedDaysAgo)],
  );
  for (const state of deliveries) {
    await db.pool.query(
      `INSERT INTO deliveries (id, message_id, provider, status, created_at, updated_at, open) VALUES ($1, $2, 'fcm', $3::"DeliveryStatus", $4, $4, $5)`,
      [randomUUID(), id, state, ago(ageDays), state === 'pending' || state === 'sending' ? true : null],
    );
  }
  const eventIds = [];
  for (const spec of events) eventIds.push(await event(spec, id));
  ids.messages.push(id);
  return { id, events: eventIds };
}

const existing = async (table: 'messages' | 'events', wanted: string[]) =>
  (await db.pool.query<{ id: string }>(`SELECT id FROM ${table} WHERE id = ANY($1::uuid[]) ORDER BY id`, [wanted])).rows.map((row) => row.id).sort();
const deliveriesOf = async (messageIds: string[]) =>
  (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE message_id = ANY($1::uuid[])', [messageIds])).rows[0].n;

/** Purges until a round finds nothing, and answers each round's counts. */
async function drain(options: PurgeOptions) {
  const rounds = [];
  for (let i = 0; i < 1000; i++) {
    const purged = await purgeOnce(db.pool, options);
    if (!purged.events && !purged.messages) return rounds;
    rounds.push(purged);
  }
  throw new Error('the purge never ran dry');
}

describe('purgeOnce', () => {
  it('purges old settled messages with their deliveries and status events, a batch per statement', async () => {
    const old = await Promise.all(
      (['sent', 'failed', 'delivered', 'opened', 'clicked'] as const).map((status) =>
        message({ ageDays: 40, status, deliveries: ['sent', 'failed'], events: [{ state: 'delivered', ageDays: 40 }, { state: 'dead', ageDays: 40 }] }),
      ),
    );
    const rounds = await drain({ retentionDays: 30, batchSize: 2 });
    expect(rounds.every((round) => round.messages <= 2)).toBe(true);
    expect(rounds.filter((round) => round.messages > 0).length).toBeGreaterThanOrEqual(3);
    expect(await existing('messages', old.map((m) => m.id))).toEqual([]);
    expect(await deliveriesOf(old.map((m) => m.id))).toBe(0);
    expect(await existing('events', old.flatMap((m) => m.events))).toEqual([]);
  });

  it('purges delivered and dead events past the retention on their own (bonus events, events of a kept message)', async () => {
    const bonusDelivered = await event({ state: 'delivered', ageDays: 31, topic: 'bonus' });
    const bonusDead = await event({ state: 'dead', ageDays: 45, topic: 'bonus' });
    const bonusRecentDead = await event({ state: 'dead', ageDays: 2, topic: 'bonus' });
    // Opened yesterday: the message stays, its first status event of 40 days ago goes.
    const opened = await message({ ageDays: 40, status: 'opened', changedDaysAgo: 1, events: [{ state: 'delivered', ageDays: 40 }, { state: 'delivered', ageDays: 1 }] });
    await drain({ retentionDays: 30, batchSize: 2 });
    expect(await existing('events', [bonusDelivered, bonusDead, bonusRecentDead, ...opened.events])).toEqual([bonusRecentDead, opened.events[1]].sort());
    expect(await existing('messages', [opened.id])).toEqual([opened.id]);
  });

  it('keeps recent messages, accepted ones, ones with a delivery still to send, ones with an event still to post, and every financial record', async () => {
    const kept = [
      await message({ ageDays: 3 }),
      await message({ ageDays: 40, status: 'accepted', deliveries: ['pending'], events: [] }),
      await message({ ageDays: 40, status: 'sent', deliveries: ['sent', 'pending'] }),
      await message({ ageDays: 40, status: 'sent', deliveries: ['sent', 'sending'] }),
      await message({ ageDays: 40, status: 'failed', deliveries: ['failed'], events: [{ state: 'pending', ageDays: 40 }] }),
    ];
    const pendingBonus = await event({ state: 'pending', ageDays: 60, topic: 'bonus' });
    const money = await oldFinancialRecords();

    await drain({ retentionDays: 30, batchSize: 100 });

    expect(await existing('messages', kept.map((m) => m.id))).toEqual(kept.map((m) => m.id).sort());
    expect(await deliveriesOf(kept.map((m) => m.id))).toBe(7);
    expect(await existing('events', [pendingBonus, ...kept[4].events])).toEqual([pendingBonus, ...kept[4].events].sort());
    expect(await money.count()).toEqual({ credits: 1, accounts: 1, ledger_entries: 1, player_bonuses: 1 });
    await money.remove();
  });

  it('with feedOnly, lets pending push statuses (which nobody will post) age out with their messages, but not other pending events', async () => {
    const polled = await message({ ageDays: 40, events: [{ state: 'pending', ageDays: 40 }] });
    const strayStatus = await event({ state: 'pending', ageDays: 40 }, randomUUID());
    const pendingBonus = await event({ state: 'pending', ageDays: 60, topic: 'bonus' });
    await drain({ retentionDays: 30, batchSize: 100, feedOnly: true });
    expect(await existing('messages', [polled.id])).toEqual([]);
    expect(await existing('events', [...polled.events, strayStatus, pendingBonus])).toEqual([pendingBonus]);
  });

  it('purges nothing with RETENTION_DAYS=0', async () => {
    const old = await message({ ageDays: 400, events: [{ state: 'delivered', ageDays: 400 }, { state: 'dead', ageDays: 400 }] });
    expect(await purgeOnce(db.pool, { retentionDays: 0 })).toEqual({ events: 0, messages: 0 });
    expect(await existing('messages', [old.id])).toEqual([old.id]);
    expect(await existing('events', old.events)).toEqual(old.events.sort());
    await drain({ retentionDays: 30 });
  });

  it('finds what to purge through indexes, not by reading the tables', async () => {
    // Enough recent rows that reading a whole table would cost more than an index.
    const topic = `retention-plan-${randomUUID().slice(0, 8)}`;
    await db.pool.query(
      `INSERT INTO events (id, topic, ordering_key, status)
       SELECT gen_random_uuid(), $1, $1 || i, 'sent' FROM generate_series(1, 20000) AS i`,
      [topic],
    );
    await db.pool.query(
      `INSERT INTO messages (id, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash, payload, crm_headers, status)
       SELECT gen_random_uuid(), $1, 1000000 + i, $2, 1, 2, 3, 'th', '{}', '{}', 'sent' FROM generate_series(1, 20000) AS i`,
      [brand, player],
    );
    await db.pool.query('ANALYZE events');
    await db.pool.query('ANALYZE messages');
    try {
      const plans: string[] = [];
      const explaining = {
        query: async (text: string, params: unknown[]) => {
          const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, params);
          plans.push(rows.map((row) => row['QUERY PLAN']).join('\n'));
          return { rows: [{ events: 0, messages: 0 }], rowCount: 0 };
        },
      } as unknown as Sql;
      await purgeOnce(explaining, { retentionDays: 30, feedOnly: true });
      expect(plans).toHaveLength(2);
      for (const plan of plans) expect(plan).not.toMatch(/Seq Scan on (messages|events)/);
      const [messages, events] = plans;
      expect(messages).toMatch(/Index Scan using messages_created_at_idx on messages/);
      expect(events).toMatch(/Index Scan using events_occurred_at_idx on events/);
    } finally {
      await db.pool.query('DELETE FROM events WHERE topic = $1', [topic]);
    }
  });
});

describe('startRetention', () => {
  const recorder = () => {
    const lines: { level: string; message: string; details: object }[] = [];
    const at = (level: string) => (details: object, message: string) => void lines.push({ level, message, details });
    return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
  };

  it('purges the backlog batch after batch, says what it purged, and stops', async () => {
    const old = await Promise.all([1, 2, 3].map(() => message({ ageDays: 50 })));
    const { lines, log } = recorder();
    const retention = startRetention({ db, log, retentionDays: 30, intervalMs: 50, batchSize: 1 });
    const deadline = Date.now() + 10000;
    while ((await existing('messages', old.map((m) => m.id))).length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    while (!lines.some((line) => line.message === 'retention purged old messages and events') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await retention.stop();
    expect(await existing('messages', old.map((m) => m.id))).toEqual([]);
    expect(lines.find((line) => line.message === 'retention purged old messages and events')?.details).toMatchObject({ retentionDays: 30 });
  });

  it('does nothing with RETENTION_DAYS=0, and says so', async () => {
    const old = await message({ ageDays: 400 });
    const { lines, log } = recorder();
    const retention = startRetention({ db, log, retentionDays: 0, intervalMs: 10 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await retention.stop();
    expect(await existing('messages', [old.id])).toEqual([old.id]);
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
    `INSERT INTO credits (id, idempotency_key, kind, user_id, bonus_code, amount_minor, currency, type, request, crm_headers, status, created_at, updated_at)
     VALUES ($1, $4, 'bonus', $2, 'WELCOME100', 1000, 'EUR', 'WelcomeBonus', '{}', '{}', 'completed', $3, $3)`,
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
