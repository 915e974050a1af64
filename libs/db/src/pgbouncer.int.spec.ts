import { randomUUID } from 'node:crypto';
import { startPgBouncer, type PgBouncer } from '@operator/testing';
import { closeDb, createDb, inTransaction, type Db } from './client';

// Needs PostgreSQL and the pgbouncer binary. The pool works through PgBouncer in transaction mode
// with PgBouncer's defaults (which refuse startup parameters such as statement_timeout), and the
// sessions' limits still hold there: they are the database's defaults, not the connection's.

let bouncer: PgBouncer;
let db: Db;

beforeAll(async () => {
  bouncer = await startPgBouncer(process.env.DATABASE_URL!);
  db = createDb({ url: bouncer.url, poolSize: 4 });
});
afterAll(async () => {
  await closeDb(db);
  await bouncer.stop();
});

describe('the pool behind PgBouncer in transaction mode, PgBouncer defaults', () => {
  it('serves plain queries, Prisma queries and inTransaction', async () => {
    expect((await db.pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect(await db.bonus.count()).toBeGreaterThanOrEqual(0);
    const code = `pgb-${randomUUID().slice(0, 8)}`;
    await db.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT 1`;
    });
    const written = await inTransaction(db, async (sql) => {
      await sql.query('CREATE TEMP TABLE pooled (code text) ON COMMIT DROP');
      await sql.query('INSERT INTO pooled VALUES ($1)', [code]);
      return (await sql.query<{ code: string }>('SELECT code FROM pooled')).rows;
    });
    expect(written).toEqual([{ code }]);
  });

  it('runs every transaction with a 10 s statement timeout, 40 s idle-in-transaction timeout and no JIT', async () => {
    const settings = await inTransaction(db, async (sql) => {
      const show = async (name: string) => (await sql.query<Record<string, string>>(`SHOW ${name}`)).rows[0][name];
      return { statement_timeout: await show('statement_timeout'), idle: await show('idle_in_transaction_session_timeout'), jit: await show('jit') };
    });
    expect(settings).toEqual({ statement_timeout: '10s', idle: '40s', jit: 'off' });
    // And outside a transaction, through Prisma (a statement of its own on whichever server connection).
    expect(await db.$queryRaw`SELECT current_setting('statement_timeout') AS value`).toEqual([{ value: '10s' }]);
  });

  it('cancels a statement past the timeout', async () => {
    // SET LOCAL is what a shorter limit takes behind a pooler: it ends with the transaction.
    await expect(
      inTransaction(db, async (sql) => {
        await sql.query("SET LOCAL statement_timeout = '100ms'");
        await sql.query('SELECT pg_sleep(1)');
      }),
    ).rejects.toMatchObject({ code: '57014' });
    expect(await inTransaction(db, async (sql) => (await sql.query('SHOW statement_timeout')).rows[0].statement_timeout)).toBe('10s');
  });
});
