import { randomUUID } from 'node:crypto';
import {
  closeDb,
  createDb,
  getCredit,
  listPlayerBonuses,
  playerAccounts,
  recordCredit,
  upsertBonus,
  type BonusRow,
  type CreditRow,
  type Db,
  type NewCredit,
} from '@operator/db';
import { FakeCrm, seededRandom, startConnectProxy, uniqueName } from '@operator/testing';
import { tupleKey } from './credit';
import { formatMinor } from './money';
import { changeBonusStatus, expireDueBonuses, processCredit, type BonusDeps } from './service';
import { httpWallet, ledgerWallet } from './wallet';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** Runs `work` over `items`, at most `limit` at a time. */
async function inParallel<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await work(items[index]);
      }
    }),
  );
  return results;
}

describe('bonus credits, the ledger and bonus events (PostgreSQL)', () => {
  let db: Db;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 20 });
  });
  afterAll(async () => {
    await closeDb(db);
  });

  const deps = (overrides: Partial<BonusDeps> = {}): BonusDeps => ({
    db,
    wallet: ledgerWallet,
    events: { headerWord: 'Service', origin: 'operator', exchangeRates: { USD: 0.92 } },
    log: silent,
    maxAttempts: 3,
    backoffMs: 20,
    leaseMs: 60000,
    owner: randomUUID(),
    concurrency: 8,
    postMarginMs: 1000,
    ...overrides,
  });

  async function catalogBonus(overrides: Partial<BonusRow> = {}): Promise<BonusRow> {
    const bonus: BonusRow = {
      code: uniqueName('BONUS'),
      label: 'Welcome 10.50',
      type: 'WelcomeBonus',
      product: 'Casino',
      amountMinor: 1050n,
      currency: 'EUR',
      validityDays: 30,
      wageringRequirement: '35.00',
      active: true,
      brandId: null,
      ...overrides,
    };
    await upsertBonus(db.pool, bonus);
    return bonus;
  }

  const crmHeaders = () => ({
    id: uniqueName('svc'),
    activity_id: '1001',
    action_id: '2002',
    action_group_id: '3003',
    action_communication_profile_id: '4004',
    trigger_hash: uniqueName('hash'),
  });

  /**
   * Records a credit and parks it (next attempt far away), so a bonus worker that other tests may
   * run never claims it: these tests process their credits themselves.
   */
  async function credit(fields: Partial<NewCredit> & Pick<NewCredit, 'userId'>): Promise<CreditRow> {
    const headers = fields.crmHeaders ?? crmHeaders();
    const { credit: row } = await recordCredit(db.pool, {
      brandId: '0',
      idempotencyKey: uniqueName('idem'),
      tupleKey: null,
      kind: 'bonus',
      fingerprint: 'test',
      bonusCode: null,
      amountMinor: 1050n,
      currency: 'EUR',
      type: 'WelcomeBonus',
      requestText: JSON.stringify({ user_id: fields.userId, extra: 'kept' }),
      ...fields,
      crmHeaders: headers,
    });
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE id = $1`, [row.id]);
    return row;
  }

  const fresh = async (id: string) => (await getCredit(db.pool, id))!;

  async function entriesOf(transactionId: string) {
    const { rows } = await db.pool.query<{ owner: string; kind: string; currency: string; amount: string; reason: string }>(
      `SELECT a.owner, a.kind, a.currency, e.amount_minor::text AS amount, e.reason
         FROM ledger_entries e JOIN accounts a ON a.id = e.account_id WHERE e.transaction_id = $1 ORDER BY e.amount_minor`,
      [transactionId],
    );
    return rows.map((row) => ({ ...row, amount: BigInt(row.amount) }));
  }

  /** Every entry on the player's accounts, with the transaction it belongs to. */
  async function playerTransactions(userIds: string[]) {
    const { rows } = await db.pool.query<{ transaction_id: string }>(
      `SELECT DISTINCT e.transaction_id FROM ledger_entries e JOIN accounts a ON a.id = e.account_id WHERE a.owner = ANY($1::text[])`,
      [userIds],
    );
    return rows.map((row) => row.transaction_id);
  }

  async function eventsOf(orderingKey: string) {
    const { rows } = await db.pool.query<{ topic: string; status: string; text: string }>(
      `SELECT topic, status, body::text AS text FROM events WHERE ordering_key = $1 ORDER BY seq`,
      [orderingKey],
    );
    return rows.map((row) => ({ ...row, body: JSON.parse(row.text) }));
  }

  async function eventsAbout(userId: string) {
    const { rows } = await db.pool.query<{ topic: string; status: string }>(`SELECT topic, status FROM events WHERE body->>'user_id' = $1 ORDER BY seq`, [userId]);
    return rows;
  }

  async function balances(userId: string) {
    const accounts = await playerAccounts(db.pool, null, userId);
    return Object.fromEntries(accounts.map((a) => [`${a.currency}:${a.kind}`, a.balanceMinor]));
  }

  /** Each account of the players: its balance equals the sum of its entries. */
  async function expectBalancesMatchEntries(userIds: string[]) {
    const { rows } = await db.pool.query<{ owner: string; currency: string; kind: string; balance: string; entries: string }>(
      `SELECT a.owner, a.currency, a.kind, a.balance_minor::text AS balance, COALESCE(SUM(e.amount_minor), 0)::text AS entries
         FROM accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id
        WHERE a.owner = ANY($1::text[]) GROUP BY a.id ORDER BY a.owner, a.currency, a.kind`,
      [userIds],
    );
    for (const row of rows) expect({ ...row, entries: row.balance }).toEqual(row);
    return rows;
  }

  /** Every transaction touching the players sums to zero, and its legs are in one currency. */
  async function expectTransactionsBalance(transactionIds: string[]) {
    const { rows } = await db.pool.query<{ transaction_id: string; sum: string; legs: number; currencies: number }>(
      `SELECT e.transaction_id, SUM(e.amount_minor)::text AS sum, COUNT(*)::int AS legs, COUNT(DISTINCT a.currency)::int AS currencies
         FROM ledger_entries e JOIN accounts a ON a.id = e.account_id WHERE e.transaction_id = ANY($1::uuid[]) GROUP BY e.transaction_id`,
      [transactionIds],
    );
    expect(rows).toHaveLength(transactionIds.length);
    for (const row of rows) expect(row).toEqual({ transaction_id: row.transaction_id, sum: '0', legs: 2, currencies: 1 });
  }

  describe('the built-in ledger', () => {
    it('credits a bonus once: one balanced entry pair, the Created bonus event and a balance event, the credit completed', async () => {
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const headers = crmHeaders();
      const row = await credit({ userId: user, bonusCode: bonus.code, crmHeaders: headers });

      expect(await processCredit(deps(), row)).toBe('completed');

      const entries = await entriesOf(row.id);
      expect(entries).toEqual([
        { owner: 'house', kind: 'house', currency: 'EUR', amount: -1050n, reason: 'bonus-credit' },
        { owner: user, kind: 'bonus_money', currency: 'EUR', amount: 1050n, reason: 'bonus-credit' },
      ]);
      expect(entries.reduce((sum, e) => sum + e.amount, 0n)).toBe(0n);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 1050n });
      await expectBalancesMatchEntries([user]);

      const [playerBonus, ...more] = await listPlayerBonuses(db.pool, null, user);
      expect(more).toEqual([]);
      expect(playerBonus).toMatchObject({
        creditId: row.id,
        userId: user,
        bonusCode: bonus.code,
        type: 'WelcomeBonus',
        product: 'Casino',
        amountMinor: 1050n,
        currency: 'EUR',
        requiredWageringMinor: 36750n,
        status: 'Created',
      });
      expect(Math.abs(playerBonus.expiresAt.getTime() - (Date.now() + 30 * 86400000))).toBeLessThan(60000);

      const bonusEvents = await eventsOf(`bonus:${playerBonus.id}`);
      expect(bonusEvents.map((e) => [e.topic, e.status])).toEqual([['bonus', 'Created']]);
      expect(bonusEvents[0].text).toContain('"amount":10.50');
      expect(bonusEvents[0].text).toContain('"required_wagering_amount":367.50');
      expect(bonusEvents[0].body).toMatchObject({
        amount: 10.5,
        bonus_id: bonus.code,
        bonus_code: bonus.code,
        currency: 'EUR',
        exchange_rate: 1,
        origin: 'operator',
        user_bonus_id: playerBonus.id,
        user_id: user,
        product: 'Casino',
        status: 'Created',
        type: 'WelcomeBonus',
        service_references: { ...headers, activity_id: 1001, action_id: 2002, action_group_id: 3003, action_communication_profile_id: 4004 },
      });
      expect(bonusEvents[0].body).not.toHaveProperty('bonus_turned_real');

      const balanceEvents = await eventsOf(`balance:${user}`);
      expect(balanceEvents.map((e) => [e.topic, e.status])).toEqual([['balance', 'balance']]);
      expect(balanceEvents[0].text).toContain('"amount":10.50');
      expect(balanceEvents[0].body).toMatchObject({
        balances: [
          { amount: 0, currency: 'EUR', key: 'real_money' },
          { amount: 10.5, currency: 'EUR', key: 'bonus_money' },
        ],
        origin: 'operator',
        user_id: user,
      });

      expect(await fresh(row.id)).toMatchObject({ status: 'completed', attempts: 1, reference: null, error: null });

      // Again: with the row as first read (still accepted) and with the fresh (completed) row.
      expect(await processCredit(deps(), row)).toBe('skipped');
      expect(await processCredit(deps(), await fresh(row.id))).toBe('skipped');
      expect(await entriesOf(row.id)).toHaveLength(2);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 1050n });
      expect(await listPlayerBonuses(db.pool, null, user)).toHaveLength(1);
      expect(await eventsOf(`bonus:${playerBonus.id}`)).toHaveLength(1);
      expect(await eventsOf(`balance:${user}`)).toHaveLength(1);
      expect(await fresh(row.id)).toMatchObject({ status: 'completed', attempts: 1 });
    });

    it('finishes a credit once when several workers process it at the same time', async () => {
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const row = await credit({ userId: user, bonusCode: bonus.code, amountMinor: 777n });

      // Four workers: one takes it. And four calls of one worker, which all hold it: one records it.
      const outcomes = await Promise.all([processCredit(deps(), row), processCredit(deps(), row), processCredit(deps(), row), processCredit(deps(), row)]);
      expect(outcomes.sort()).toEqual(['completed', 'skipped', 'skipped', 'skipped']);
      const other = await credit({ userId: uniqueName('player'), bonusCode: bonus.code, amountMinor: 777n });
      const one = deps();
      // Each holds it unless another call has finished it first (then it is skipped): either way one records it.
      const calls = await Promise.all([processCredit(one, other), processCredit(one, other), processCredit(one, other), processCredit(one, other)]);
      expect(calls).toContain('completed');
      expect(calls.filter((outcome) => outcome !== 'completed' && outcome !== 'skipped')).toEqual([]);
      expect(await entriesOf(other.id)).toHaveLength(2);

      expect(await entriesOf(row.id)).toHaveLength(2);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 777n });
      const bonuses = await listPlayerBonuses(db.pool, null, user);
      expect(bonuses).toHaveLength(1);
      expect((await eventsOf(`bonus:${bonuses[0].id}`)).map((e) => e.status)).toEqual(['Created']);
      expect(await eventsOf(`balance:${user}`)).toHaveLength(1);
      expect(await fresh(row.id)).toMatchObject({ status: 'completed', attempts: 1 });
      await expectBalancesMatchEntries([user]);
    });

    it('credits funds as real money, with a balance event and no bonus', async () => {
      const user = uniqueName('player');
      const row = await credit({ userId: user, kind: 'funds', bonusCode: null, type: 'cashback', amountMinor: 2500n, currency: 'USD' });

      expect(await processCredit(deps(), row)).toBe('completed');

      expect(await entriesOf(row.id)).toEqual([
        { owner: 'house', kind: 'house', currency: 'USD', amount: -2500n, reason: 'funds-cashback' },
        { owner: user, kind: 'real_money', currency: 'USD', amount: 2500n, reason: 'funds-cashback' },
      ]);
      expect(await balances(user)).toEqual({ 'USD:real_money': 2500n });
      expect(await listPlayerBonuses(db.pool, null, user)).toEqual([]);
      expect(await eventsAbout(user)).toEqual([{ topic: 'balance', status: 'balance' }]);
      const [balance] = await eventsOf(`balance:${user}`);
      expect(balance.text).toContain('"amount":25.00');
      expect(balance.body.balances).toEqual([
        { amount: 25, currency: 'USD', key: 'real_money', exchange_rate: 0.92 },
        { amount: 0, currency: 'USD', key: 'bonus_money', exchange_rate: 0.92 },
      ]);
      expect(await fresh(row.id)).toMatchObject({ status: 'completed', attempts: 1 });

      expect(await processCredit(deps(), row)).toBe('skipped');
      expect(await entriesOf(row.id)).toHaveLength(2);
      expect(await balances(user)).toEqual({ 'USD:real_money': 2500n });
    });
  });

  it('keeps the books straight over a random run of credits and status changes', async () => {
    const seed = Date.now() % 1_000_000;
    const random = seededRandom(seed);
    const players = Array.from({ length: 4 }, () => uniqueName('player'));
    const currencies = ['EUR', 'USD', 'JPY', 'BHD'] as const;
    const catalog = [await catalogBonus(), await catalogBonus({ type: 'ReloadBonus', product: 'Sportsbook', wageringRequirement: '0.00' })];

    const expected = new Map<string, bigint>();
    const add = (user: string, currency: string, kind: string, amount: bigint) => {
      const key = `${user}|${currency}|${kind}`;
      expected.set(key, (expected.get(key) ?? 0n) + amount);
    };

    const credits: CreditRow[] = [];
    for (let i = 0; i < 200; i++) {
      const userId = random.pick(players);
      const currency = random.pick(currencies);
      const amountMinor = BigInt(random.int(1, 500000));
      const funds = random.next() < 0.4;
      credits.push(
        await credit(
          funds
            ? { userId, kind: 'funds', bonusCode: null, type: random.pick(['cashback', 'wheel']), amountMinor, currency }
            : { userId, kind: 'bonus', bonusCode: random.pick(catalog).code, type: 'WelcomeBonus', amountMinor, currency },
        ),
      );
      add(userId, currency, funds ? 'real_money' : 'bonus_money', amountMinor);
    }

    const d = deps();
    random.shuffle(credits);
    const half = credits.length / 2;
    const firstHalf = credits.slice(0, half);
    const secondHalf = credits.slice(half);

    expect(await inParallel(firstHalf, 8, (row) => processCredit(d, row))).toEqual(firstHalf.map(() => 'completed'));

    // The rest are processed while the first half's bonuses change status, some of them by two
    // requests at once (only one may win).
    const firstBonuses = (await Promise.all(players.map((p) => listPlayerBonuses(db.pool, null, p)))).flat();
    const finals = ['Completed', 'Forfeited', 'Expired'] as const;
    const changes = firstBonuses
      .filter(() => random.next() < 0.7)
      .map((bonus) => ({ bonus, statuses: random.next() < 0.3 ? [random.pick(finals), random.pick(finals)] : [random.pick(finals)] }));
    const [processed, changed] = await Promise.all([
      inParallel(secondHalf, 6, (row) => processCredit(d, row)),
      inParallel(changes, 6, async ({ bonus, statuses }) => ({ bonus, results: await Promise.all(statuses.map((s) => changeBonusStatus(d, bonus.id, s))) })),
    ]);
    expect(processed).toEqual(secondHalf.map(() => 'completed'));

    const finalStatus = new Map<string, string>();
    for (const { bonus, results } of changed) {
      const winners = results.filter((r) => r.ok && r.changed);
      expect(winners).toHaveLength(1);
      const won = winners[0] as Extract<(typeof results)[number], { ok: true }>;
      for (const r of results) {
        if (r === won) continue;
        // The loser asked for the same status (no change) or another final one (not allowed).
        if (r.ok) expect(r).toMatchObject({ changed: false, bonus: { status: won.bonus.status } });
        else expect(r).toEqual({ ok: false, error: 'not-allowed', from: won.bonus.status });
      }
      finalStatus.set(bonus.id, won.bonus.status);
      add(bonus.userId, bonus.currency, 'bonus_money', -bonus.amountMinor);
      if (won.bonus.status === 'Completed') add(bonus.userId, bonus.currency, 'real_money', bonus.amountMinor);
    }

    // Every credit completed, once.
    const { rows: statuses } = await db.pool.query<{ status: string; attempts: number; n: number }>(
      `SELECT status::text AS status, attempts, COUNT(*)::int AS n FROM credits WHERE id = ANY($1::uuid[]) GROUP BY 1, 2`,
      [credits.map((c) => c.id)],
    );
    expect(statuses).toEqual([{ status: 'completed', attempts: 1, n: 200 }]);

    // Each player account: balance = sum of its entries = what the run should have left there.
    const accounts = await expectBalancesMatchEntries(players);
    const actual = new Map(accounts.map((a) => [`${a.owner}|${a.currency}|${a.kind}`, BigInt(a.balance)]));
    for (const [key, amount] of expected) expect([key, actual.get(key) ?? 0n]).toEqual([key, amount]);
    for (const [key, amount] of actual) expect([key, amount]).toEqual([key, expected.get(key) ?? 0n]);

    // Each transaction balances; one per credit and one per final status change that moved money.
    const transactions = await playerTransactions(players);
    expect(transactions).toHaveLength(200 + finalStatus.size);
    const transactionSet = new Set(transactions);
    expect(credits.filter((c) => !transactionSet.has(c.id))).toEqual([]);
    await expectTransactionsBalance(transactions);

    // Per currency, the house's legs in these transactions balance the players' money.
    const { rows: perCurrency } = await db.pool.query<{ currency: string; players: string; house: string }>(
      `SELECT a.currency,
              COALESCE(SUM(e.amount_minor) FILTER (WHERE a.owner <> 'house'), 0)::text AS players,
              COALESCE(SUM(e.amount_minor) FILTER (WHERE a.owner = 'house'), 0)::text AS house
         FROM ledger_entries e JOIN accounts a ON a.id = e.account_id WHERE e.transaction_id = ANY($1::uuid[]) GROUP BY a.currency`,
      [transactions],
    );
    for (const row of perCurrency) {
      expect(BigInt(row.players) + BigInt(row.house)).toBe(0n);
      const playersTotal = accounts.filter((a) => a.currency === row.currency).reduce((sum, a) => sum + BigInt(a.balance), 0n);
      expect([row.currency, BigInt(row.players)]).toEqual([row.currency, playersTotal]);
    }

    // Events: one Created per bonus credit plus one per change; a balance event per money movement,
    // and the last one of each currency shows the final balances.
    const allBonuses = (await Promise.all(players.map((p) => listPlayerBonuses(db.pool, null, p)))).flat();
    expect(allBonuses).toHaveLength(credits.filter((c) => c.kind === 'bonus').length);
    for (const bonus of allBonuses) {
      const events = await eventsOf(`bonus:${bonus.id}`);
      const final = finalStatus.get(bonus.id);
      expect(events.map((e) => e.status)).toEqual(final ? ['Created', final] : ['Created']);
      expect(bonus.status).toBe(final ?? 'Created');
      if (final === 'Completed') expect(events[1].text).toContain(`"bonus_turned_real":${formatMinor(bonus.amountMinor, bonus.currency)}`);
      else if (final) expect(events[1].body).not.toHaveProperty('bonus_turned_real');
      expect(events[0].text).toContain(`"amount":${formatMinor(bonus.amountMinor, bonus.currency)},`);
    }
    for (const player of players) {
      const events = await eventsOf(`balance:${player}`);
      const movements =
        credits.filter((c) => c.userId === player).length + allBonuses.filter((b) => b.userId === player && finalStatus.has(b.id)).length;
      expect([player, events.length]).toEqual([player, movements]);
      const last = new Map<string, { amount: number; key: string }[]>();
      for (const event of events) last.set(event.body.balances[0].currency, event.body.balances);
      for (const [currency, shown] of last) {
        expect([player, currency, shown.map((b) => [b.key, b.amount])]).toEqual([
          player,
          currency,
          [
            ['real_money', Number(formatMinor(expected.get(`${player}|${currency}|real_money`) ?? 0n, currency))],
            ['bonus_money', Number(formatMinor(expected.get(`${player}|${currency}|bonus_money`) ?? 0n, currency))],
          ],
        ]);
      }
    }
  }, 120000);

  describe('through the operator platform (HTTP wallet)', () => {
    let platform: FakeCrm;
    const PLATFORM_PATH = '/credits';
    const startPlatform = async () => (await FakeCrm.start()).respondWith(201, undefined, '{"reference":"P-1"}');

    beforeEach(async () => {
      platform = await startPlatform();
    });
    afterEach(async () => {
      await platform.close();
    });

    async function nextAttemptIn(id: string): Promise<number> {
      const { rows } = await db.pool.query<{ ms: number }>(
        `SELECT (EXTRACT(EPOCH FROM next_attempt_at - clock_timestamp()) * 1000)::float8 AS ms FROM credits WHERE id = $1`,
        [id],
      );
      return rows[0].ms;
    }

    it('retries failures and timeouts with the same Idempotency-Key, then completes with the platform reference', async () => {
      platform.answer(500, { status: 200, body: '{"reference":"TOO-LATE"}', delayMs: 2000 }, 503);
      const d = deps({ wallet: httpWallet({ url: platform.url(PLATFORM_PATH), timeoutMs: 500 }), maxAttempts: 5, backoffMs: 10000 });
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const row = await credit({ userId: user, bonusCode: bonus.code, amountMinor: 1050n });

      expect(await processCredit(d, await fresh(row.id))).toBe('retry');
      expect(await fresh(row.id)).toMatchObject({ status: 'accepted', attempts: 1, error: expect.stringContaining('HTTP 500') });
      // The first retry waits half to all of backoffMs (10 s).
      expect(await nextAttemptIn(row.id)).toBeGreaterThan(4000);
      expect(await nextAttemptIn(row.id)).toBeLessThanOrEqual(10000);

      const started = Date.now();
      expect(await processCredit(d, await fresh(row.id))).toBe('retry');
      expect(Date.now() - started).toBeLessThan(1500);
      expect(await fresh(row.id)).toMatchObject({ status: 'accepted', attempts: 2, error: expect.stringMatching(/no answer within 500 ms/) });
      // The second waits twice as long.
      expect(await nextAttemptIn(row.id)).toBeGreaterThan(9000);
      expect(await nextAttemptIn(row.id)).toBeLessThanOrEqual(20000);

      expect(await processCredit(d, await fresh(row.id))).toBe('retry');
      expect(await fresh(row.id)).toMatchObject({ status: 'accepted', attempts: 3, error: expect.stringContaining('HTTP 503') });
      expect(await nextAttemptIn(row.id)).toBeGreaterThan(0);

      expect(await processCredit(d, await fresh(row.id))).toBe('completed');
      expect(await fresh(row.id)).toMatchObject({ status: 'completed', attempts: 4, reference: 'P-1', error: null });

      expect(platform.received).toHaveLength(4);
      for (const request of platform.received) {
        expect(request.method).toBe('POST');
        expect(request.headers['idempotency-key']).toBe(row.id);
        expect(request.headers['content-type']).toMatch(/^application\/json/);
        expect(request.body).toContain('"amount":"10.50"');
        expect(request.json).toMatchObject({ credit_id: row.id, brand_id: 0, kind: 'bonus', user_id: user, bonus_code: bonus.code, amount: '10.50', currency: 'EUR' });
      }

      // The platform keeps the money: nothing in our ledger, no balance event; the bonus is ours to report.
      expect(await entriesOf(row.id)).toEqual([]);
      expect(await playerAccounts(db.pool, null, user)).toEqual([]);
      const bonuses = await listPlayerBonuses(db.pool, null, user);
      expect(bonuses).toHaveLength(1);
      expect(await eventsAbout(user)).toEqual([{ topic: 'bonus', status: 'Created' }]);

      // Processing it again does not record it again.
      expect(await processCredit(d, row)).toBe('skipped');
      expect(await listPlayerBonuses(db.pool, null, user)).toHaveLength(1);
      expect(await eventsAbout(user)).toHaveLength(1);
      expect(await fresh(row.id)).toMatchObject({ status: 'completed', attempts: 4, reference: 'P-1' });
    });

    it('fails a credit the platform refuses (422) at once, with the error recorded and no event', async () => {
      platform.answer({ status: 422, body: '{"error":"player is blocked"}' });
      const d = deps({ wallet: httpWallet({ url: platform.url(PLATFORM_PATH), timeoutMs: 500 }) });
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const row = await credit({ userId: user, bonusCode: bonus.code });

      expect(await processCredit(d, row)).toBe('failed');
      const failed = await fresh(row.id);
      expect(failed).toMatchObject({ status: 'failed', attempts: 1, reference: null });
      expect(failed.error).toContain('HTTP 422');
      expect(failed.error).toContain('player is blocked');
      expect(platform.received).toHaveLength(1);
      expect(await listPlayerBonuses(db.pool, null, user)).toEqual([]);
      expect(await eventsAbout(user)).toEqual([]);
      expect(await entriesOf(row.id)).toEqual([]);
    });

    it('fails a credit whose transient failures outlast maxAttempts', async () => {
      platform.respondWith(503);
      const d = deps({ wallet: httpWallet({ url: platform.url(PLATFORM_PATH), timeoutMs: 500 }), maxAttempts: 3 });
      const user = uniqueName('player');
      const row = await credit({ userId: user, kind: 'funds', bonusCode: null, type: 'cashback', amountMinor: 500n, currency: 'JPY' });

      expect(await processCredit(d, await fresh(row.id))).toBe('retry');
      expect(await processCredit(d, await fresh(row.id))).toBe('retry');
      expect(await processCredit(d, await fresh(row.id))).toBe('failed');
      expect(await fresh(row.id)).toMatchObject({ status: 'failed', attempts: 3, error: expect.stringContaining('HTTP 503') });
      expect(platform.received).toHaveLength(3);
      expect(platform.received.every((r) => r.headers['idempotency-key'] === row.id && r.json.amount === '500')).toBe(true);
      expect(await eventsAbout(user)).toEqual([]);
      expect(await entriesOf(row.id)).toEqual([]);
    });

    it.each([301, 302, 307, 308])('never follows a %i: the credit is not completed, and nothing goes where it points', async (status) => {
      const elsewhere = await FakeCrm.start();
      try {
        elsewhere.respondWith(200, undefined, '{"reference":"NOT-A-CREDIT"}');
        platform.respondWith(status, { Location: elsewhere.url('/elsewhere') });
        const d = deps({ wallet: httpWallet({ url: platform.url(PLATFORM_PATH), apiKey: 'platform-key', timeoutMs: 500 }) });
        const user = uniqueName('player');
        const row = await credit({ userId: user, kind: 'funds', bonusCode: null, type: 'cashback', amountMinor: 100n, currency: 'EUR' });

        expect(await processCredit(d, row)).toBe('failed');
        expect(await fresh(row.id)).toMatchObject({ status: 'failed', attempts: 1, reference: null, error: expect.stringMatching(new RegExp(`^platform answered HTTP ${status}`)) });
        expect(platform.received).toHaveLength(1);
        expect(elsewhere.received).toHaveLength(0);
        expect(await entriesOf(row.id)).toEqual([]);
      } finally {
        await elsewhere.close();
      }
    });

    it('keeps no raw text of what the platform answers, and reads only its start', async () => {
      platform.answer({ status: 400, body: `<html>internal stack trace ${'x'.repeat(2_000_000)}</html>` });
      const d = deps({ wallet: httpWallet({ url: platform.url(PLATFORM_PATH), timeoutMs: 2000 }) });
      const row = await credit({ userId: uniqueName('player'), kind: 'funds', bonusCode: null, type: 'cashback', amountMinor: 100n, currency: 'EUR' });
      expect(await processCredit(d, row)).toBe('failed');
      expect((await fresh(row.id)).error).toBe('platform answered HTTP 400');
    });

    it('goes through the operator’s proxy (HTTP_PROXY) in absolute form, with its credentials', async () => {
      // As Squid runs by default: CONNECT to 443 only.
      const proxy = await startConnectProxy({ credentials: { username: 'egress', password: 'pw' }, connectPorts: [443] });
      try {
        const d = deps({ wallet: httpWallet({ url: platform.url(PLATFORM_PATH), timeoutMs: 2000, proxy: { httpProxy: proxy.url } }) });
        const row = await credit({ userId: uniqueName('player'), kind: 'funds', bonusCode: null, type: 'cashback', amountMinor: 100n, currency: 'EUR' });
        expect(await processCredit(d, row)).toBe('completed');
        expect(proxy.targets()).toEqual([new URL(platform.url('/')).host]);
        expect(proxy.connections).toEqual([expect.objectContaining({ method: 'FORWARD', requestLine: `POST ${platform.url(PLATFORM_PATH)}` })]);
        expect(platform.received).toHaveLength(1);
      } finally {
        await proxy.close();
      }
    });

    it('retries when the platform cannot be reached at all', async () => {
      const gone = platform;
      platform = await startPlatform(); // closed in afterEach; started first so the old port stays unused
      const url = gone.url(PLATFORM_PATH);
      await gone.close();
      const d = deps({ wallet: httpWallet({ url, timeoutMs: 500 }), maxAttempts: 2 });
      const user = uniqueName('player');
      const row = await credit({ userId: user, kind: 'funds', bonusCode: null, type: 'cashback', amountMinor: 100n, currency: 'EUR' });

      expect(await processCredit(d, await fresh(row.id))).toBe('retry');
      expect(await fresh(row.id)).toMatchObject({ status: 'accepted', attempts: 1, error: expect.stringContaining('platform unreachable') });
      expect(await processCredit(d, await fresh(row.id))).toBe('failed');
      expect(await fresh(row.id)).toMatchObject({ status: 'failed', attempts: 2 });
    });
  });

  describe('expiry', () => {
    it('expires a bonus past its validity once: Expired event, balance event, the bonus money taken back', async () => {
      const d = deps();
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const row = await credit({ userId: user, bonusCode: bonus.code, amountMinor: 1999n });
      expect(await processCredit(d, row)).toBe('completed');
      const [playerBonus] = await listPlayerBonuses(db.pool, null, user);

      // Not due yet: nothing happens to it.
      await expireDueBonuses(d);
      expect((await listPlayerBonuses(db.pool, null, user))[0].status).toBe('Created');

      await db.pool.query(`UPDATE player_bonuses SET expires_at = now() - interval '1 minute' WHERE id = $1`, [playerBonus.id]);
      expect(await expireDueBonuses(d)).toBeGreaterThanOrEqual(1);

      expect((await listPlayerBonuses(db.pool, null, user))[0].status).toBe('Expired');
      const events = await eventsOf(`bonus:${playerBonus.id}`);
      expect(events.map((e) => e.status)).toEqual(['Created', 'Expired']);
      expect(events[1].body).toMatchObject({ status: 'Expired', amount: 19.99, user_bonus_id: playerBonus.id, user_id: user });
      expect(events[1].body).not.toHaveProperty('bonus_turned_real');
      const balanceEvents = await eventsOf(`balance:${user}`);
      expect(balanceEvents).toHaveLength(2);
      expect(balanceEvents[1].body.balances.map((b: { key: string; amount: number }) => [b.key, b.amount])).toEqual([
        ['real_money', 0],
        ['bonus_money', 0],
      ]);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 0n });
      await expectBalancesMatchEntries([user]);
      const transactions = await playerTransactions([user]);
      expect(transactions).toHaveLength(2);
      await expectTransactionsBalance(transactions);
      const expiry = await entriesOf(transactions.find((t) => t !== row.id)!);
      expect(expiry).toEqual([
        { owner: user, kind: 'bonus_money', currency: 'EUR', amount: -1999n, reason: 'bonus-expired' },
        { owner: 'house', kind: 'house', currency: 'EUR', amount: 1999n, reason: 'bonus-expired' },
      ]);

      // Again: nothing changes.
      await expireDueBonuses(d);
      expect((await listPlayerBonuses(db.pool, null, user))[0].status).toBe('Expired');
      expect(await eventsOf(`bonus:${playerBonus.id}`)).toHaveLength(2);
      expect(await eventsOf(`balance:${user}`)).toHaveLength(2);
      expect(await playerTransactions([user])).toHaveLength(2);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 0n });
    });
  });

  describe('status changes', () => {
    async function processedBonus(amountMinor = 1050n, currency = 'EUR') {
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const row = await credit({ userId: user, bonusCode: bonus.code, amountMinor, currency });
      expect(await processCredit(deps(), row)).toBe('completed');
      const [playerBonus] = await listPlayerBonuses(db.pool, null, user);
      return { user, row, playerBonus };
    }

    it('Completed turns the bonus money into real money and reports bonus_turned_real; a final status does not move again', async () => {
      const d = deps();
      const { user, playerBonus } = await processedBonus();

      // A move between live statuses reports the status and moves no money.
      const ongoing = await changeBonusStatus(d, playerBonus.id, 'Ongoing');
      expect(ongoing).toMatchObject({ ok: true, changed: true, bonus: { status: 'Ongoing' } });
      expect(await playerTransactions([user])).toHaveLength(1);
      expect(await eventsOf(`balance:${user}`)).toHaveLength(1);
      expect(await changeBonusStatus(d, playerBonus.id, 'Ongoing')).toMatchObject({ ok: true, changed: false });

      const completed = await changeBonusStatus(d, playerBonus.id, 'Completed', user);
      expect(completed).toMatchObject({ ok: true, changed: true, bonus: { id: playerBonus.id, status: 'Completed' } });
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 0n, 'EUR:real_money': 1050n });
      await expectBalancesMatchEntries([user]);
      const transactions = await playerTransactions([user]);
      expect(transactions).toHaveLength(2);
      await expectTransactionsBalance(transactions);

      const events = await eventsOf(`bonus:${playerBonus.id}`);
      expect(events.map((e) => e.status)).toEqual(['Created', 'Ongoing', 'Completed']);
      expect(events[1].body).not.toHaveProperty('bonus_turned_real');
      expect(events[2].text).toContain('"bonus_turned_real":10.50');
      expect(events[2].body).toMatchObject({ status: 'Completed', bonus_turned_real: 10.5, amount: 10.5, user_bonus_id: playerBonus.id });
      const balanceEvents = await eventsOf(`balance:${user}`);
      expect(balanceEvents).toHaveLength(2);
      expect(balanceEvents[1].body.balances.map((b: { key: string; amount: number }) => [b.key, b.amount])).toEqual([
        ['real_money', 10.5],
        ['bonus_money', 0],
      ]);

      // Final: no other status, the same one is no change; nothing reported, no money moved.
      expect(await changeBonusStatus(d, playerBonus.id, 'Forfeited')).toEqual({ ok: false, error: 'not-allowed', from: 'Completed' });
      expect(await changeBonusStatus(d, playerBonus.id, 'Created')).toEqual({ ok: false, error: 'not-allowed', from: 'Completed' });
      expect(await changeBonusStatus(d, playerBonus.id, 'Expired')).toEqual({ ok: false, error: 'not-allowed', from: 'Completed' });
      expect(await changeBonusStatus(d, playerBonus.id, 'Completed')).toMatchObject({ ok: true, changed: false, bonus: { status: 'Completed' } });
      expect(await eventsOf(`bonus:${playerBonus.id}`)).toHaveLength(3);
      expect(await eventsOf(`balance:${user}`)).toHaveLength(2);
      expect(await playerTransactions([user])).toHaveLength(2);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 0n, 'EUR:real_money': 1050n });
    });

    it('Forfeited takes the bonus money back to the house', async () => {
      const d = deps();
      const { user, row, playerBonus } = await processedBonus(300n, 'JPY');
      expect(await changeBonusStatus(d, playerBonus.id, 'Forfeited')).toMatchObject({ ok: true, changed: true });
      expect(await balances(user)).toEqual({ 'JPY:bonus_money': 0n });
      const transactions = await playerTransactions([user]);
      await expectTransactionsBalance(transactions);
      expect(await entriesOf(transactions.find((t) => t !== row.id)!)).toEqual([
        { owner: user, kind: 'bonus_money', currency: 'JPY', amount: -300n, reason: 'bonus-forfeited' },
        { owner: 'house', kind: 'house', currency: 'JPY', amount: 300n, reason: 'bonus-forfeited' },
      ]);
      const events = await eventsOf(`bonus:${playerBonus.id}`);
      expect(events.map((e) => e.status)).toEqual(['Created', 'Forfeited']);
      expect(events[1].text).toContain('"amount":300,');
      expect(events[1].body).not.toHaveProperty('bonus_turned_real');
    });

    it('refuses unknown statuses and bonuses, and other players asking', async () => {
      const d = deps();
      const { user, playerBonus } = await processedBonus();
      expect(await changeBonusStatus(d, playerBonus.id, 'Bogus')).toEqual({ ok: false, error: 'not-allowed', from: 'Created' });
      expect(await changeBonusStatus(d, playerBonus.id, 'completed')).toEqual({ ok: false, error: 'not-allowed', from: 'Created' });
      expect(await changeBonusStatus(d, playerBonus.id, 'Completed', uniqueName('other'))).toEqual({ ok: false, error: 'not-found' });
      expect(await changeBonusStatus(d, randomUUID(), 'Completed')).toEqual({ ok: false, error: 'not-found' });
      expect(await changeBonusStatus(d, playerBonus.id, 'Created')).toMatchObject({ ok: true, changed: false });
      expect((await eventsOf(`bonus:${playerBonus.id}`)).map((e) => e.status)).toEqual(['Created']);
      expect(await balances(user)).toEqual({ 'EUR:bonus_money': 1050n });
    });

    it('lets only one of two concurrent final changes through', async () => {
      const d = deps();
      const { user, playerBonus } = await processedBonus(4242n);
      const results = await Promise.all([changeBonusStatus(d, playerBonus.id, 'Completed'), changeBonusStatus(d, playerBonus.id, 'Forfeited')]);
      const winners = results.filter((r) => r.ok && r.changed);
      expect(winners).toHaveLength(1);
      expect(results.filter((r) => !r.ok)).toHaveLength(1);
      const won = (winners[0] as { bonus: { status: string } }).bonus.status;
      expect((await eventsOf(`bonus:${playerBonus.id}`)).map((e) => e.status)).toEqual(['Created', won]);
      expect(await balances(user)).toEqual(won === 'Completed' ? { 'EUR:bonus_money': 0n, 'EUR:real_money': 4242n } : { 'EUR:bonus_money': 0n });
      await expectBalancesMatchEntries([user]);
      await expectTransactionsBalance(await playerTransactions([user]));
    });
  });

  describe('recordCredit races', () => {
    const newCredit = (userId: string, fields: Partial<NewCredit> = {}): NewCredit => ({
      brandId: '0',
      idempotencyKey: uniqueName('idem'),
      tupleKey: null,
      kind: 'funds',
      fingerprint: 'test',
      userId,
      bonusCode: null,
      amountMinor: 100n,
      currency: 'EUR',
      type: 'cashback',
      crmHeaders: {},
      requestText: '{}',
      ...fields,
    });

    async function parkAll(ids: string[]) {
      await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE id = ANY($1::uuid[])`, [ids]);
    }

    it('records one credit for 20 concurrent requests with the same idempotency key', async () => {
      const user = uniqueName('player');
      const key = uniqueName('idem');
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => recordCredit(db.pool, newCredit(user, { idempotencyKey: key, amountMinor: BigInt(100 + i) }))));
      await parkAll(answers.map((a) => a.credit.id));
      const ids = new Set(answers.map((a) => a.credit.id));
      expect(ids.size).toBe(1);
      expect(answers.filter((a) => !a.replay)).toHaveLength(1);
      const { rows } = await db.pool.query(`SELECT id FROM credits WHERE idempotency_key = $1 OR user_id = $2`, [key, user]);
      expect(rows).toEqual([{ id: [...ids][0] }]);
      // Every answer is the first credit as recorded.
      const first = answers.find((a) => !a.replay)!.credit;
      for (const a of answers) expect(a.credit).toEqual(first);
    });

    it('records one credit for 20 concurrent requests with the same activity, action, player and trigger hash', async () => {
      const user = uniqueName('player');
      const headers = { activity_id: '77', action_id: '88', trigger_hash: uniqueName('hash') };
      const tuple = tupleKey(headers, user);
      expect(tuple).not.toBeNull();
      const answers = await Promise.all(Array.from({ length: 20 }, () => recordCredit(db.pool, newCredit(user, { tupleKey: tuple, crmHeaders: headers }))));
      await parkAll(answers.map((a) => a.credit.id));
      expect(new Set(answers.map((a) => a.credit.id)).size).toBe(1);
      expect(answers.filter((a) => !a.replay)).toHaveLength(1);
      const { rows } = await db.pool.query(`SELECT id FROM credits WHERE tuple_key = $1 OR user_id = $2`, [tuple, user]);
      expect(rows).toHaveLength(1);

      // Another trigger hash is another credit; the same tuple later is still the first one.
      const other = await recordCredit(db.pool, newCredit(user, { tupleKey: tupleKey({ ...headers, trigger_hash: uniqueName('hash') }, user) }));
      const again = await recordCredit(db.pool, newCredit(user, { tupleKey: tuple }));
      await parkAll([other.credit.id]);
      expect(other.replay).toBe(false);
      expect(again).toMatchObject({ replay: true, credit: { id: answers[0].credit.id } });
    });
  });

  describe('per brand', () => {
    async function brandEvents(userId: string) {
      const { rows } = await db.pool.query<{ brand: string | null; topic: string; key: string; text: string }>(
        `SELECT brand_id::text AS brand, topic, ordering_key AS key, body::text AS text FROM events WHERE body->>'user_id' = $1 ORDER BY seq`,
        [userId],
      );
      return rows.map((row) => ({ ...row, body: JSON.parse(row.text) }));
    }

    it('keeps the same player id in two brands apart: two credits, two wallets, two bonuses, each event with its brand', async () => {
      const d = deps();
      const user = uniqueName('player');
      const bonus = await catalogBonus();
      const key = uniqueName('idem');
      const one = await credit({ brandId: '1', idempotencyKey: key, userId: user, bonusCode: bonus.code });
      const two = await credit({ brandId: '2', idempotencyKey: key, userId: user, bonusCode: bonus.code, amountMinor: 700n });
      expect(two.id).not.toBe(one.id);
      expect(await processCredit(d, one)).toBe('completed');
      expect(await processCredit(d, two)).toBe('completed');

      const wallet = async (brand: string) => Object.fromEntries((await playerAccounts(db.pool, [brand], user)).map((a) => [a.kind, a.balanceMinor]));
      expect(await wallet('1')).toEqual({ bonus_money: 1050n });
      expect(await wallet('2')).toEqual({ bonus_money: 700n });
      await expectBalancesMatchEntries([user]);
      const [bonusOne] = await listPlayerBonuses(db.pool, ['1'], user);
      const [bonusTwo] = await listPlayerBonuses(db.pool, ['2'], user);
      expect(bonusOne).toMatchObject({ brandId: '1', creditId: one.id, amountMinor: 1050n });
      expect(bonusTwo).toMatchObject({ brandId: '2', creditId: two.id, amountMinor: 700n });

      // A caller of brand 1 does not find brand 2's bonus; brand 2's completion moves brand 2's wallet only.
      expect(await changeBonusStatus(d, bonusTwo.id, 'Completed', user, ['1'])).toEqual({ ok: false, error: 'not-found' });
      expect(await changeBonusStatus(d, bonusTwo.id, 'Completed', user, ['2'])).toMatchObject({ ok: true, changed: true });
      expect(await wallet('1')).toEqual({ bonus_money: 1050n });
      expect(await wallet('2')).toEqual({ bonus_money: 0n, real_money: 700n });
      await expectBalancesMatchEntries([user]);

      const events = await brandEvents(user);
      expect(events.map((e) => [e.brand, e.topic, e.key])).toEqual([
        ['1', 'bonus', `bonus:${bonusOne.id}`],
        ['1', 'balance', `balance:1:${user}`],
        ['2', 'bonus', `bonus:${bonusTwo.id}`],
        ['2', 'balance', `balance:2:${user}`],
        ['2', 'bonus', `bonus:${bonusTwo.id}`],
        ['2', 'balance', `balance:2:${user}`],
      ]);
      // The bodies are the CRM's schemas as they are: the brand is the event's, not a field of its body.
      for (const event of events) expect(event.body).not.toHaveProperty('brand_id');
      expect(events[5].body.balances.map((b: { key: string; amount: number }) => [b.key, b.amount])).toEqual([
        ['real_money', 7],
        ['bonus_money', 0],
      ]);
    });
  });
});
