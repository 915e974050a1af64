import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { claimDueCredits, closeDb, createDb, getCredit, recordCredit, releaseCredits, type CreditRow, type Db } from '@operator/db';
import { FakeCrm, TcpProxy, uniqueName } from '@operator/testing';
import { processCredit, runBonusRound, type BonusDeps } from './service';
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
    owner: randomUUID(),
    concurrency: 8,
    postMarginMs: 1000,
    ...overrides,
  });

  /** A recorded credit, parked so that no bonus worker of another suite claims it. */
  async function credit(userId: string, brandId = '1', idempotencyKey = uniqueName('idem')): Promise<CreditRow> {
    const { credit: row } = await recordCredit(db.pool, {
      brandId,
      idempotencyKey,
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
    const [me, other] = [randomUUID(), randomUUID()];
    const claimed = (await claimDueCredits(db.pool, 1000, 60000, me)).filter((c) => c.id === row.id);
    expect(claimed).toHaveLength(1);
    expect((await claimDueCredits(db.pool, 1000, 60000, other)).some((c) => c.id === row.id)).toBe(false);
    expect(await releaseCredits(db.pool, [row.id], other)).toBe(0);
    expect(await releaseCredits(db.pool, [row.id], me)).toBe(1);
    const again = (await claimDueCredits(db.pool, 1000, 60000, other)).filter((c) => c.id === row.id);
    expect(again).toHaveLength(1);
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day', locked_until = NULL WHERE id = $1`, [row.id]);
  });

  it('at shutdown gives back the credits of a round not started, never one whose post is in flight, and starts none of them after', async () => {
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE status = 'accepted'`);
    const rows = [await credit(uniqueName('player')), await credit(uniqueName('player')), await credit(uniqueName('player'))];
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() WHERE id = ANY($1::uuid[])`, [rows.map((r) => r.id)]);
    let inFlight: (() => void) | undefined;
    const posted: string[] = [];
    const wallet: Wallet = {
      postsToLedger: false,
      timeoutMs: 5000,
      async carryOut(c) {
        posted.push(c.id);
        await new Promise<void>((resolve) => (inFlight = resolve));
        return { ok: true, reference: 'P-1' };
      },
    };
    const d = deps({ wallet, concurrency: 1 });
    const held = new Set<string>();
    const round = runBonusRound(d, 50, held);
    while (!inFlight) await new Promise((resolve) => setTimeout(resolve, 10));
    // What the bonus app does when its shutdown deadline passes (apps/bonus/src/main.ts, abandon).
    const unstarted = [...held];
    held.clear();
    expect(await releaseCredits(db.pool, unstarted, d.owner)).toBe(2);
    expect(unstarted).not.toContain(posted[0]);
    const { rows: leases } = await db.pool.query(`SELECT id, lease_owner AS owner, locked_until > now() AS live FROM credits WHERE id = ANY($1::uuid[])`, [rows.map((r) => r.id)]);
    expect(leases.find((l) => l.id === posted[0])).toEqual({ id: posted[0], owner: d.owner, live: true });
    inFlight();
    await round;
    expect(posted).toHaveLength(1);
    expect(await getCredit(db.pool, posted[0])).toMatchObject({ status: 'completed' });
    await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE id = ANY($1::uuid[])`, [unstarted]);
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
        timeoutMs: platformWallet.timeoutMs,
        async carryOut(c, timeoutMs) {
          const result = await platformWallet.carryOut(c, timeoutMs);
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

  it("cuts a post's deadline to what its lease has left once taken, and gives the credit back untried when too little is left", async () => {
    /** The database, with the statement that takes a credit for its post answering `ms` late. */
    const slowToHold = (ms: number): Db => {
      const pool = new Proxy(db.pool, {
        get(target, property) {
          if (property === 'query') {
            return async (text: string, values: unknown[]) => {
              if (text.includes('lease_owner = $2 OR')) await new Promise((resolve) => setTimeout(resolve, ms));
              return target.query(text, values);
            };
          }
          const value = Reflect.get(target, property);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      return new Proxy(db, { get: (target, property) => (property === 'pool' ? pool : Reflect.get(target, property)) });
    };
    const given: number[] = [];
    const recording: Wallet = {
      postsToLedger: false,
      timeoutMs: 2000,
      async carryOut(_credit, timeoutMs) {
        given.push(timeoutMs!);
        return { ok: true, reference: 'P-1' };
      },
    };
    // The lease: twice the 2000 ms timeout and a 400 ms margin at each end, 4800 ms.
    const quick = await credit(uniqueName('player'));
    expect(await processCredit(deps({ wallet: recording, postMarginMs: 400 }), quick)).toBe('completed');
    // 1000 ms for the statement leaves 3400 ms to the margin: 1700 ms for each of the two deadlines.
    const late = await credit(uniqueName('player'));
    expect(await processCredit(deps({ db: slowToHold(1000), wallet: recording, postMarginMs: 400 }), late)).toBe('completed');
    expect(given[0]).toBe(2000);
    expect(given[1]).toBeLessThanOrEqual(1700);
    expect(given[1]).toBeLessThan(2000);

    // 2600 ms leaves at most 900 ms each, under half the timeout: not posted, and free for the next try.
    const later = await credit(uniqueName('player'));
    expect(await processCredit(deps({ db: slowToHold(2600), wallet: recording, postMarginMs: 400 }), later)).toBe('skipped');
    expect(given).toHaveLength(2);
    expect(await getCredit(db.pool, later.id)).toMatchObject({ status: 'accepted', attempts: 0 });
    const { rows } = await db.pool.query(`SELECT locked_until, lease_owner FROM credits WHERE id = $1`, [later.id]);
    expect(rows).toEqual([{ locked_until: null, lease_owner: null }]);
  });

  it("records a post's failure only while it holds the credit: never over another holder's lease", async () => {
    // The lease is lost during the post (the process stalled past it) and another app took the credit.
    const takenMeanwhile = (answer: { retry: boolean }): Wallet => ({
      postsToLedger: false,
      timeoutMs: 1000,
      async carryOut(c) {
        await db.pool.query(`UPDATE credits SET lease_owner = $2, locked_until = now() + interval '1 minute' WHERE id = $1`, [c.id, randomUUID()]);
        return { ok: false, retry: answer.retry, error: 'platform answered HTTP 503' };
      },
    });
    for (const retry of [true, false]) {
      const row = await credit(uniqueName('player'));
      const before = (await db.pool.query(`SELECT lease_owner, locked_until FROM credits WHERE id = $1`, [row.id])).rows;
      expect(before).toEqual([{ lease_owner: null, locked_until: null }]);
      expect(await processCredit(deps({ wallet: takenMeanwhile({ retry }) }), row)).toBe(retry ? 'retry' : 'failed');
      expect(await getCredit(db.pool, row.id)).toMatchObject({ status: 'accepted', attempts: 0, error: null });
      const { rows } = await db.pool.query(`SELECT locked_until > now() AS live FROM credits WHERE id = $1`, [row.id]);
      expect(rows).toEqual([{ live: true }]);
    }
  });

  describe('two bonus apps and a slow platform', () => {
    /** One POST the platform saw: its Idempotency-Key and brand, when it came, and when it ended (answered, or given up by the client). */
    type Post = { key: string; brand?: number; at: number; end?: number; answered: boolean };

    /** The operator's platform, answering each POST 200 after `delayMs`, and keeping each one's span. */
    async function slowPlatform(delayMs: number) {
      const posts: Post[] = [];
      const server = http.createServer((req, res) => {
        const post: Post = { key: String(req.headers['idempotency-key']), at: Date.now(), answered: false };
        posts.push(post);
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => (post.brand = JSON.parse(Buffer.concat(chunks).toString('utf8')).brand_id));
        const timer = setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"reference":"P-${post.key}"}`), delayMs);
        res.on('finish', () => {
          post.answered = true;
          post.end = Date.now();
        });
        res.on('close', () => {
          clearTimeout(timer);
          post.end ??= Date.now();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/credits`;
      return { url, posts, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
    }

    /**
     * `count` funds credits due now, and every other accepted credit of the database parked, so
     * that the two workers see only these. They are pairs: the same X-Service-Id for the same
     * player id (`player`, or one of each pair's own) in brand 1 and in brand 2, two credits.
     */
    async function dueCredits(count: number, player?: string): Promise<string[]> {
      await db.pool.query(`UPDATE credits SET next_attempt_at = now() + interval '1 day' WHERE status = 'accepted'`);
      const ids: string[] = [];
      for (let i = 0; i < count / 2; i++) {
        const [userId, key] = [player ?? uniqueName('player'), uniqueName('idem')];
        for (const brand of ['1', '2']) ids.push((await credit(userId, brand, key)).id);
      }
      expect(new Set(ids).size).toBe(count);
      await db.pool.query(`UPDATE credits SET next_attempt_at = now() WHERE id = ANY($1::uuid[])`, [ids]);
      return ids;
    }

    /** A bonus app's loop: rounds until none of `ids` is accepted any more. */
    async function worker(d: BonusDeps, ids: string[], startAfterMs: number, deadline: number) {
      await new Promise((resolve) => setTimeout(resolve, startAfterMs));
      for (;;) {
        await runBonusRound(d);
        const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM credits WHERE id = ANY($1::uuid[]) AND status = 'accepted'`, [ids]);
        if (rows[0].n === 0 || Date.now() > deadline) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }

    /**
     * Two bonus apps, a second apart, each with its own lease owner and a claim lease (3 s) far
     * shorter than their batch takes at 4 posts at a time, so each one's claims lapse under it
     * while the other looks for work.
     */
    async function twoApps(platformDelayMs: number, timeoutMs: number) {
      const platform = await slowPlatform(platformDelayMs);
      try {
        const ids = await dueCredits(40);
        const app = (): BonusDeps =>
          deps({ wallet: httpWallet({ url: platform.url, timeoutMs }), owner: randomUUID(), leaseMs: 3000, concurrency: 4, postMarginMs: 500, backoffMs: 100, maxAttempts: 10 });
        const deadline = Date.now() + 45_000;
        await Promise.all([worker(app(), ids, 0, deadline), worker(app(), ids, 1000, deadline)]);
        const { rows } = await db.pool.query<{ id: string; brand: string; status: string; reference: string | null }>(
          `SELECT id, brand_id::text AS brand, status, reference FROM credits WHERE id = ANY($1::uuid[])`,
          [ids],
        );
        const posts = platform.posts.filter((post) => ids.includes(post.key));
        return { ids, rows, posts };
      } finally {
        await platform.close();
      }
    }

    /** The POSTs of each credit, in order of arrival. */
    function byKey(posts: Post[]): Map<string, Post[]> {
      const map = new Map<string, Post[]>();
      for (const post of posts) map.set(post.key, [...(map.get(post.key) ?? []), post]);
      return map;
    }

    it('posts each of 40 credits over two brands exactly once, with a platform answering in 2 s', async () => {
      const { ids, rows, posts } = await twoApps(2000, 2500);
      expect(rows.filter((row) => row.status === 'completed').map((row) => row.id).sort()).toEqual([...ids].sort());
      const twice = [...byKey(posts)].filter(([, list]) => list.length !== 1).map(([key, list]) => `${key}: ${list.length}`);
      expect(twice).toEqual([]);
      expect(posts).toHaveLength(40);
      // Per brand: its 20 credits completed, each posted once with its brand.
      for (const brand of ['1', '2']) {
        const mine = rows.filter((row) => row.brand === brand);
        expect(mine.filter((row) => row.status === 'completed')).toHaveLength(20);
        const brandPosts = posts.filter((post) => post.brand === Number(brand));
        expect(brandPosts.map((post) => post.key).sort()).toEqual(mine.map((row) => row.id).sort());
      }
    }, 60_000);

    it("credits each of 40 credits over two brands once into its brand's wallet, with two apps on the built-in ledger", async () => {
      const player = uniqueName('player');
      const ids = await dueCredits(40, player);
      const app = (): BonusDeps => deps({ owner: randomUUID(), leaseMs: 3000, concurrency: 4, backoffMs: 100, maxAttempts: 10 });
      const deadline = Date.now() + 45_000;
      await Promise.all([worker(app(), ids, 0, deadline), worker(app(), ids, 200, deadline)]);
      const { rows } = await db.pool.query<{ brand: string; completed: number }>(
        `SELECT brand_id::text AS brand, count(*) FILTER (WHERE status = 'completed')::int AS completed FROM credits WHERE id = ANY($1::uuid[]) GROUP BY brand_id ORDER BY brand_id`,
        [ids],
      );
      expect(rows).toEqual([
        { brand: '1', completed: 20 },
        { brand: '2', completed: 20 },
      ]);
      // One entry per credit on the player's wallet of the credit's brand, and the balance their sum.
      const { rows: wallets } = await db.pool.query(
        `SELECT a.brand_id::text AS brand, a.balance_minor::text AS balance, count(e.id)::int AS entries, count(DISTINCT e.transaction_id)::int AS credits,
                count(*) FILTER (WHERE c.brand_id = a.brand_id)::int AS own
           FROM accounts a JOIN ledger_entries e ON e.account_id = a.id JOIN credits c ON c.id = e.transaction_id
          WHERE a.owner = $1 GROUP BY a.id ORDER BY a.brand_id`,
        [player],
      );
      expect(wallets).toEqual([
        { brand: '1', balance: '10000', entries: 20, credits: 20, own: 20 },
        { brand: '2', balance: '10000', entries: 20, credits: 20, own: 20 },
      ]);
    }, 60_000);

    it('never has two posts of one credit in flight, with a platform answering just under the timeout', async () => {
      const { ids, rows, posts } = await twoApps(1800, 2000);
      expect(rows.filter((row) => row.status === 'completed').map((row) => row.id).sort()).toEqual([...ids].sort());
      for (const [key, list] of byKey(posts)) {
        // A credit is posted again only after its last post was given up (its deadline passed),
        // and once it ended: never beside it.
        for (let i = 1; i < list.length; i++) {
          expect({ key, previousAnswered: list[i - 1].answered, overlaps: list[i].at < (list[i - 1].end ?? Infinity) }).toEqual({ key, previousAnswered: false, overlaps: false });
        }
      }
      expect(new Set(posts.map((post) => post.key)).size).toBe(40);
    }, 60_000);
  });
});
