import { claimDueCredits, closeDb, createDb, getCredit, recordCredit, releaseCredits, type CreditRow, type Db } from '@operator/db';
import { FakeCrm, TcpProxy, uniqueName } from '@operator/testing';
import { processCredit, type BonusDeps } from './service';
import { httpWallet, ledgerWallet, type Wallet } from './wallet';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('crediting under faults (PostgreSQL)', () => {
  let db: Db;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 5 });
  });
  afterAll(async () => {
    await closeDb(db);
  });

  const deps = (overrides: Partial<BonusDeps> = {}): BonusDeps => ({
    db,
    wallet: ledgerWallet,
    events: { headerWord: 'Service', origin: 'operator', exchangeRates: {} },
    log: silent,
    maxAttempts: 3,
    backoffMs: 20,
    leaseMs: 60000,
    ...overrides,
  });

  /** A recorded credit, parked so that no bonus worker of another suite claims it. */
  async function credit(userId: string): Promise<CreditRow> {
    const { credit: row } = await recordCredit(db.pool, {
      idempotencyKey: uniqueName('idem'),
      tupleKey: null,
      kind: 'funds',
      fingerprint: 'test',
      userId,
      bonusCode: null,
      amountMinor: 500n,
      currency: 'EUR',
      type: 'cashback',
      crmHeaders: { id: uniqueName('svc') },
      requestText: JSON.stringify({ user_id: userId }),
    });
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE id = $1`, [row.id]);
    return row;
  }

  it('fails a credit whose recording keeps failing for a reason that will not change, after BONUS_MAX_ATTEMPTS, with the reason', async () => {
    const player = uniqueName('doomed');
    // The database refuses this player's ledger entries, every time.
    await db.pool.query(`
      CREATE OR REPLACE FUNCTION refuse_doomed() RETURNS trigger AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM accounts a WHERE a.id = NEW.account_id AND a.owner LIKE 'doomed-%') THEN
          RAISE EXCEPTION 'numeric field overflow (test)' USING ERRCODE = '22003';
        END IF;
        RETURN NEW;
      END $$ LANGUAGE plpgsql`);
    await db.pool.query(`DROP TRIGGER IF EXISTS refuse_doomed ON ledger_entries`);
    await db.pool.query(`CREATE TRIGGER refuse_doomed BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION refuse_doomed()`);
    try {
      const row = await credit(player);
      const outcomes = [];
      for (let round = 0; round < 3; round++) outcomes.push(await processCredit(deps(), (await getCredit(db.pool, row.id))!));
      expect(outcomes).toEqual(['retry', 'retry', 'failed']);
      expect(await getCredit(db.pool, row.id)).toMatchObject({ status: 'failed', attempts: 3, error: expect.stringContaining('numeric field overflow') });
    } finally {
      await db.pool.query(`DROP TRIGGER IF EXISTS refuse_doomed ON ledger_entries`);
    }
  });

  it('gives back, at shutdown, the claims on credits it has not processed', async () => {
    const row = await credit(uniqueName('player'));
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() WHERE id = $1`, [row.id]);
    const claimed = (await claimDueCredits(db.pool, 1000, 60000)).filter((c) => c.id === row.id);
    expect(claimed).toHaveLength(1);
    expect((await claimDueCredits(db.pool, 1000, 60000)).some((c) => c.id === row.id)).toBe(false);
    expect(await releaseCredits(db.pool, [row.id])).toBe(1);
    const again = (await claimDueCredits(db.pool, 1000, 60000)).filter((c) => c.id === row.id);
    expect(again).toHaveLength(1);
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day', locked_until = NULL WHERE id = $1`, [row.id]);
  });

  it('records a credit the platform carried out through a PostgreSQL cut, without calling the platform again', async () => {
    const platform = (await FakeCrm.start()).respondWith(201, undefined, '{"reference":"P-7"}');
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(process.env.DATABASE_URL!).port || 5432)).start();
    const cutDb = createDb({ url: proxy.urlFor(process.env.DATABASE_URL!), poolSize: 3, connectTimeoutMs: 300 });
    try {
      const row = await credit(uniqueName('player'));
      const platformWallet = httpWallet({ url: platform.url('/credits'), timeoutMs: 2000 });
      // The platform answers, then PostgreSQL goes away for a second before the credit is recorded.
      const cutAfterCall: Wallet = {
        postsToLedger: false,
        async carryOut(c) {
          const result = await platformWallet.carryOut(c);
          await proxy.stop();
          setTimeout(() => void proxy.resume(), 1000);
          return result;
        },
      };
      expect(await processCredit(deps({ db: cutDb, wallet: cutAfterCall }), row)).toBe('completed');
      expect(await getCredit(db.pool, row.id)).toMatchObject({ status: 'completed', reference: 'P-7', attempts: 1 });
      expect(platform.received).toHaveLength(1);
    } finally {
      await closeDb(cutDb);
      await proxy.stop();
      await platform.close();
    }
  });
});
