import { TcpProxy, uniqueName, until } from '@operator/testing';
import { closeDb, createDb, inTransactionFrom, type Db } from './client';

// A transaction that writes its BEGIN and its first statement together, against PostgreSQL: the
// first statement's rows reach the work, a failure leaves nothing behind, and the statement reaches
// the server before BEGIN is answered.

describe('inTransactionFrom (PostgreSQL)', () => {
  let db: Db;
  const table = uniqueName('tx_from').replace(/-/g, '_');

  beforeAll(async () => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 2 });
    await db.pool.query(`CREATE TABLE ${table} (n int PRIMARY KEY, text text)`);
  });
  afterAll(async () => {
    await db.pool.query(`DROP TABLE IF EXISTS ${table}`);
    await closeDb(db);
  });

  it('hands the first statement its rows, commits the rest, and begins with the isolation asked for', async () => {
    const isolation = await inTransactionFrom<{ level: string }, string>(
      db,
      'BEGIN ISOLATION LEVEL SERIALIZABLE',
      { text: `SELECT current_setting('transaction_isolation') AS level`, values: [] },
      async (sql, rows) => {
        await sql.query(`INSERT INTO ${table} VALUES (1, 'committed')`);
        return rows[0].level;
      },
    );
    expect(isolation).toBe('serializable');
    const plain = await inTransactionFrom<{ n: number }, number[]>(
      db,
      'BEGIN',
      { text: `INSERT INTO ${table} VALUES ($1, $2) RETURNING n`, values: [2, "two's"] },
      async (sql, rows) => {
        expect((await sql.query(`SELECT current_setting('transaction_isolation') AS level`)).rows[0].level).toBe('read committed');
        return rows.map((row) => row.n);
      },
    );
    expect(plain).toEqual([2]);
    expect((await db.pool.query(`SELECT n, text FROM ${table} ORDER BY n`)).rows).toEqual([
      { n: 1, text: 'committed' },
      { n: 2, text: "two's" },
    ]);
  });

  it('rolls back the first statement when the work after it fails, and when it fails itself, and the connection serves on', async () => {
    await expect(
      inTransactionFrom(db, 'BEGIN', { text: `INSERT INTO ${table} VALUES (3, 'rolled back')`, values: [] }, async () => {
        throw new Error('the work failed');
      }),
    ).rejects.toThrow('the work failed');
    await expect(inTransactionFrom(db, 'BEGIN', { text: `INSERT INTO ${table} VALUES (1, 'a duplicate key')`, values: [] }, async () => 'never')).rejects.toThrow(
      /duplicate key/,
    );
    for (let i = 0; i < 3; i++) {
      const count = await inTransactionFrom<{ count: string }, string>(db, 'BEGIN', { text: `SELECT count(*) FROM ${table}`, values: [] }, async (_sql, rows) => rows[0].count);
      expect(count).toBe('2');
    }
    expect((await db.pool.query(`SELECT n FROM ${table} WHERE n = 3`)).rows).toEqual([]);
  });

  it('writes the first statement before BEGIN is answered: one round trip', async () => {
    // The server's answers are held: without pipelining the client waits for BEGIN's answer, and
    // the server never sees the statement.
    const marker = uniqueName('pipelined');
    const proxy = await TcpProxy.forUrl(process.env.DATABASE_URL!).start();
    const proxied = createDb({ url: proxy.urlFor(process.env.DATABASE_URL!), poolSize: 1 });
    try {
      await proxied.pool.query('SELECT 1');
      proxy.holdReplies();
      const running = inTransactionFrom<{ marker: string }, string>(proxied, 'BEGIN', { text: `SELECT $1::text AS marker /* ${marker} */`, values: [marker] }, async (_sql, rows) => rows[0].marker);
      await until(async () => (await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`, [`%/* ${marker} */%`])).rowCount === 1, 'the statement at the server, BEGIN unanswered');
      await proxy.resume();
      expect(await running).toBe(marker);
    } finally {
      await proxy.resume();
      await closeDb(proxied).catch(() => undefined);
      await proxy.stop();
    }
  });
});
