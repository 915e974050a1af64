import { randomUUID } from 'node:crypto';
import { uniqueName } from '@operator/testing';
import { getBonus, listBonuses, upsertBonus, type BonusRow } from './catalog';
import { claimDueCredits, finishCredit, getCredit, holdCreditForPost, listCredits, recordCredit, releaseCredits, retryCredit, type NewCredit } from './credits';
import { playerAccounts, playerEntries, postTransaction } from './ledger';
import { closeDb, createDb, type Db } from './client';

// The catalog, credits and the ledger against PostgreSQL: a credit is recorded once whatever the
// retries, taken by one worker at a time until finished; the ledger's balances are the sums of
// their entries, and a transaction posted twice counts once.

describe('bonus persistence (PostgreSQL)', () => {
  let db: Db;
  let player: string;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
  });
  afterAll(() => closeDb(db));
  beforeEach(() => {
    player = uniqueName('player');
  });

  const credit = (overrides: Partial<NewCredit> = {}): NewCredit => ({
    brandId: '0',
    idempotencyKey: uniqueName('service'),
    tupleKey: uniqueName('tuple'),
    kind: 'funds',
    fingerprint: 'request-1',
    userId: player,
    bonusCode: null,
    amountMinor: 1500n,
    currency: 'EUR',
    type: 'cashback',
    crmHeaders: { 'service-id': 'crm' },
    requestText: '{"amount": 15.00, "unknown": [1]}',
    ...overrides,
  });
  /** The ids among `ids` that were claimed, sorted (credits made in the same millisecond have no order). */
  const ours = (claimed: { id: string }[], ids: string[]) => claimed.map((c) => c.id).filter((id) => ids.includes(id)).sort();

  it('creates a bonus or replaces its fields, and lists the active ones', async () => {
    const bonus: BonusRow = {
      code: uniqueName('BONUS'),
      label: 'Welcome',
      type: 'WelcomeBonus',
      product: 'Casino',
      amountMinor: 2000n,
      currency: 'EUR',
      validityDays: 7,
      wageringRequirement: '35.00',
      active: true,
      brandId: null,
    };
    expect(await upsertBonus(db.pool, bonus)).toBe('created');
    expect(await getBonus(db.pool, bonus.code)).toEqual(bonus);

    const retired = { ...bonus, label: 'Welcome (old)', amountMinor: 9_007_199_254_740_993n, active: false };
    expect(await upsertBonus(db.pool, retired)).toBe('updated');
    expect(await getBonus(db.pool, bonus.code)).toEqual(retired);
    expect((await listBonuses(db.pool, true)).map((b) => b.code)).not.toContain(bonus.code);
    expect(await listBonuses(db.pool, false)).toContainEqual(retired);
    expect(await getBonus(db.pool, uniqueName('NONE'))).toBeUndefined();
  });

  it('records a credit once: the same service id, or the same tuple, answers the first', async () => {
    const first = credit();
    const recorded = await recordCredit(db.pool, first);
    expect(recorded.replay).toBe(false);
    expect(recorded.credit).toMatchObject({ idempotencyKey: first.idempotencyKey, userId: player, amountMinor: 1500n, status: 'accepted', attempts: 0 });
    expect(recorded.credit.request).toEqual({ amount: 15, unknown: [1] });

    const sameKey = await recordCredit(db.pool, credit({ idempotencyKey: first.idempotencyKey, amountMinor: 1n }));
    const sameTuple = await recordCredit(db.pool, credit({ tupleKey: first.tupleKey }));
    expect(sameKey).toEqual({ credit: recorded.credit, replay: true, conflict: null });
    expect(sameTuple).toEqual({ credit: recorded.credit, replay: true, conflict: null });

    // Another request under the same key, or the same tuple, is refused and changes nothing.
    const otherUnderKey = await recordCredit(db.pool, credit({ idempotencyKey: first.idempotencyKey, fingerprint: 'request-2' }));
    const otherUnderTuple = await recordCredit(db.pool, credit({ tupleKey: first.tupleKey, fingerprint: 'request-2' }));
    expect(otherUnderKey).toEqual({ credit: recorded.credit, replay: true, conflict: 'key' });
    expect(otherUnderTuple).toEqual({ credit: recorded.credit, replay: true, conflict: 'tuple' });
    expect(await getCredit(db.pool, recorded.credit.id)).toEqual(recorded.credit);

    const untupled = await recordCredit(db.pool, credit({ tupleKey: null }));
    expect(untupled.replay).toBe(false);
    expect((await listCredits(db.pool, { userId: player, limit: 10 })).map((c) => c.id).sort()).toEqual([untupled.credit.id, recorded.credit.id].sort());
  });

  it('lets one worker at a time take a due credit, until it finishes it, gives it back or puts it off', async () => {
    const a = (await recordCredit(db.pool, credit())).credit;
    const b = (await recordCredit(db.pool, credit())).credit;
    const ids = [a.id, b.id].sort();
    const [me, other] = [randomUUID(), randomUUID()];

    expect(ours(await claimDueCredits(db.pool, 1000, 60_000, me), ids)).toEqual(ids);
    expect(ours(await claimDueCredits(db.pool, 1000, 60_000, other), ids)).toEqual([]);

    expect(await releaseCredits(db.pool, [b.id], other)).toBe(0);
    expect(await releaseCredits(db.pool, [b.id], me)).toBe(1);
    await finishCredit(db.pool, a.id, { status: 'completed', reference: 'wallet-1' });
    expect(await getCredit(db.pool, a.id)).toMatchObject({ status: 'completed', reference: 'wallet-1', error: null, attempts: 1 });
    expect(await releaseCredits(db.pool, [a.id], me)).toBe(0);
    expect(ours(await claimDueCredits(db.pool, 1000, 60_000, other), ids)).toEqual([b.id]);

    // Only the holder puts it off.
    expect(await retryCredit(db.pool, b.id, new Date(Date.now() + 60_000), 'wallet unavailable', me)).toBe(false);
    expect(await getCredit(db.pool, b.id)).toMatchObject({ attempts: 0, error: null });
    expect(await retryCredit(db.pool, b.id, new Date(Date.now() + 60_000), 'wallet unavailable', other)).toBe(true);
    expect(await getCredit(db.pool, b.id)).toMatchObject({ status: 'accepted', attempts: 1, error: 'wallet unavailable' });
    expect(ours(await claimDueCredits(db.pool, 1000, 60_000, me), ids)).toEqual([]);

    await finishCredit(db.pool, b.id, { status: 'failed', error: 'refused' });
    expect(await listCredits(db.pool, { userId: player, status: 'failed', limit: 10 })).toEqual([expect.objectContaining({ id: b.id, error: 'refused', reference: null })]);
    expect(await getCredit(db.pool, randomUUID())).toBeUndefined();
  });

  it('finds a credit due at once when it is recorded, in the same transaction too', async () => {
    // now() is stored in next_attempt_at rounded to the millisecond, up one time in two: twenty
    // tries in the transaction's one now() would all find the credit due only by chance.
    const client = await db.pool.connect();
    try {
      for (let i = 0; i < 20; i++) {
        await client.query('BEGIN');
        const recorded = (await recordCredit(client, credit())).credit;
        expect(ours(await claimDueCredits(client, 1000, 60_000, randomUUID()), [recorded.id])).toEqual([recorded.id]);
        await client.query('ROLLBACK');
      }
    } finally {
      client.release();
    }
  });

  it('takes a credit for its post in one statement: a live lease of another owner, or a credit changed since read, is not taken', async () => {
    const c = (await recordCredit(db.pool, credit())).credit;
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE id = $1`, [c.id]);
    const [me, other] = [randomUUID(), randomUUID()];

    // Free: either may take it, and only one of two at once does.
    const raced = await Promise.all([holdCreditForPost(db.pool, c, me, 60_000), holdCreditForPost(db.pool, c, other, 60_000)]);
    expect(raced.filter(Boolean)).toHaveLength(1);
    const [holder, loser] = raced[0] ? [me, other] : [other, me];
    // The holder keeps it (the lease extended), the other does not get it while the lease is live.
    expect(await holdCreditForPost(db.pool, c, holder, 60_000)).toMatchObject({ id: c.id });
    expect(await holdCreditForPost(db.pool, c, loser, 60_000)).toBeUndefined();

    // Lapsed: anyone may take it, but not from a read older than its last try.
    await db.pool.query(`UPDATE credits SET locked_until = now() - interval '1 millisecond' WHERE id = $1`, [c.id]);
    expect(await holdCreditForPost(db.pool, c, loser, 50)).toMatchObject({ id: c.id });
    expect(await retryCredit(db.pool, c.id, new Date(), 'platform answered HTTP 503', loser)).toBe(true);
    expect(await holdCreditForPost(db.pool, c, holder, 60_000)).toBeUndefined();
    expect(await holdCreditForPost(db.pool, (await getCredit(db.pool, c.id))!, holder, 60_000)).toMatchObject({ attempts: 1 });

    await finishCredit(db.pool, c.id, { status: 'completed', reference: null });
    expect(await holdCreditForPost(db.pool, (await getCredit(db.pool, c.id))!, holder, 60_000)).toBeUndefined();
  });

  it('posts a balanced transaction once, and refuses one that does not balance', async () => {
    // A currency of this test's own keeps the house account's balance to this test.
    const currency = uniqueName('X');
    const legs = [
      { owner: player, currency, kind: 'bonus_money' as const, amountMinor: 2500n },
      { owner: 'house', currency, kind: 'house' as const, amountMinor: -2500n },
    ];
    const transaction = randomUUID();

    expect(await postTransaction(db.pool, '0', transaction, 'credit', legs)).toBe(true);
    expect(await postTransaction(db.pool, '0', transaction, 'credit', legs)).toBe(false);
    expect(await postTransaction(db.pool, '0', randomUUID(), 'bonus-completed', [
      { owner: player, currency, kind: 'bonus_money', amountMinor: -2500n },
      { owner: player, currency, kind: 'real_money', amountMinor: 2500n },
    ])).toBe(true);
    await expect(postTransaction(db.pool, '0', randomUUID(), 'credit', [{ ...legs[0], amountMinor: 1n }])).rejects.toThrow('does not balance (1)');

    expect(await playerAccounts(db.pool, null, player)).toEqual([
      { brandId: '0', currency, kind: 'bonus_money', balanceMinor: 0n },
      { brandId: '0', currency, kind: 'real_money', balanceMinor: 2500n },
    ]);
    expect(await playerAccounts(db.pool, null, 'house', currency)).toEqual([{ brandId: '0', currency, kind: 'house', balanceMinor: -2500n }]);
    const entries = await playerEntries(db.pool, null, player, 10);
    expect(entries.map(({ transactionId, kind, amountMinor, reason }) => ({ transactionId, kind, amountMinor, reason }))).toEqual(
      expect.arrayContaining([
        { transactionId: transaction, kind: 'bonus_money', amountMinor: 2500n, reason: 'credit' },
        expect.objectContaining({ kind: 'bonus_money', amountMinor: -2500n, reason: 'bonus-completed' }),
        expect.objectContaining({ kind: 'real_money', amountMinor: 2500n, reason: 'bonus-completed' }),
      ]),
    );
    expect(entries).toHaveLength(3);
  });

  describe('per brand', () => {
    it('records the same X-Service-Id and tuple in two brands as two credits, each repeated within its brand', async () => {
      const key = uniqueName('service');
      const tuple = uniqueName('tuple');
      const one = await recordCredit(db.pool, credit({ brandId: '1', idempotencyKey: key, tupleKey: tuple }));
      const two = await recordCredit(db.pool, credit({ brandId: '2', idempotencyKey: key, tupleKey: tuple }));
      expect(one).toMatchObject({ replay: false, credit: { brandId: '1' } });
      expect(two).toMatchObject({ replay: false, credit: { brandId: '2' } });
      expect(two.credit.id).not.toBe(one.credit.id);

      // A repeat in brand 2 is brand 2's credit; another request under the key in brand 2 conflicts with brand 2's only.
      expect(await recordCredit(db.pool, credit({ brandId: '2', idempotencyKey: key, tupleKey: tuple }))).toEqual({ credit: two.credit, replay: true, conflict: null });
      expect(await recordCredit(db.pool, credit({ brandId: '2', idempotencyKey: key, fingerprint: 'request-2' }))).toMatchObject({ replay: true, conflict: 'key', credit: { id: two.credit.id } });

      expect((await listCredits(db.pool, { userId: player, limit: 10, brands: ['1'] })).map((c) => c.id)).toEqual([one.credit.id]);
      expect((await listCredits(db.pool, { userId: player, limit: 10, brands: null })).map((c) => c.id).sort()).toEqual([one.credit.id, two.credit.id].sort());
      expect(await getCredit(db.pool, two.credit.id, ['1'])).toBeUndefined();
      expect(await getCredit(db.pool, two.credit.id, ['1', '2'])).toEqual(two.credit);
    });

    it('keeps a wallet per brand: the same player id and the house have an account in each', async () => {
      const currency = uniqueName('X');
      const legs = (amount: bigint) => [
        { owner: player, currency, kind: 'real_money' as const, amountMinor: amount },
        { owner: 'house', currency, kind: 'house' as const, amountMinor: -amount },
      ];
      expect(await postTransaction(db.pool, '1', randomUUID(), 'credit', legs(100n))).toBe(true);
      expect(await postTransaction(db.pool, '2', randomUUID(), 'credit', legs(250n))).toBe(true);

      expect(await playerAccounts(db.pool, null, player)).toEqual([
        { brandId: '1', currency, kind: 'real_money', balanceMinor: 100n },
        { brandId: '2', currency, kind: 'real_money', balanceMinor: 250n },
      ]);
      expect(await playerAccounts(db.pool, ['2'], player)).toEqual([{ brandId: '2', currency, kind: 'real_money', balanceMinor: 250n }]);
      expect(await playerAccounts(db.pool, null, 'house', currency)).toEqual([
        { brandId: '1', currency, kind: 'house', balanceMinor: -100n },
        { brandId: '2', currency, kind: 'house', balanceMinor: -250n },
      ]);
      expect((await playerEntries(db.pool, ['1'], player, 10)).map((e) => [e.brandId, e.amountMinor])).toEqual([['1', 100n]]);
      const { rows } = await db.pool.query(
        `SELECT e.brand_id::text AS entry, a.brand_id::text AS account FROM ledger_entries e JOIN accounts a ON a.id = e.account_id WHERE a.currency = $1`,
        [currency],
      );
      expect(rows).toHaveLength(4);
      for (const row of rows) expect(row.entry).toBe(row.account);
    });

    it("offers a brand the catalog's entries for every brand and its own, and changes an entry only in the brands given", async () => {
      const entry = (code: string, brandId: string | null): BonusRow => ({
        code,
        brandId,
        label: code,
        type: 'WelcomeBonus',
        product: 'Casino',
        amountMinor: 100n,
        currency: 'EUR',
        validityDays: 7,
        wageringRequirement: '1.00',
        active: true,
      });
      const all = entry(uniqueName('ALL'), null);
      const mine = entry(uniqueName('ONE'), '1');
      const theirs = entry(uniqueName('TWO'), '2');
      for (const bonus of [all, mine, theirs]) expect(await upsertBonus(db.pool, bonus)).toBe('created');

      const codes = (bonuses: BonusRow[]) => bonuses.map((b) => b.code).filter((code) => [all.code, mine.code, theirs.code].includes(code)).sort();
      expect(codes(await listBonuses(db.pool, true, ['1']))).toEqual([all.code, mine.code].sort());
      expect(codes(await listBonuses(db.pool, true, null))).toEqual([all.code, mine.code, theirs.code].sort());
      expect(await getBonus(db.pool, theirs.code, ['1'])).toBeUndefined();
      expect(await getBonus(db.pool, all.code, ['1'])).toEqual(all);
      expect(await getBonus(db.pool, mine.code, ['1'])).toEqual(mine);

      expect(await upsertBonus(db.pool, { ...theirs, brandId: '1', label: 'stolen' }, ['1'])).toBe('taken');
      expect(await upsertBonus(db.pool, { ...all, label: 'changed' }, ['1'])).toBe('taken');
      expect(await getBonus(db.pool, theirs.code)).toEqual(theirs);
      expect(await upsertBonus(db.pool, { ...mine, label: 'renamed' }, ['1'])).toBe('updated');
      expect(await getBonus(db.pool, mine.code)).toMatchObject({ label: 'renamed', brandId: '1' });
    });
  });
});
