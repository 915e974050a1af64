import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { closeDb, createDb, inTransaction, isDbUnavailable, type Db } from './client';

// The server ends our connections (as a failover, a restart or an administrator would) with
// pg_terminate_backend, in every state a connection can be in. The process must survive each time,
// report the loss, and serve the next query on a new connection. An unhandled 'error' would end
// the test process (jest reports it as a failure of the running test).

interface Line {
  level: string;
  message: string;
}

const url = process.env.DATABASE_URL!;
let admin: pg.Client;
let db: Db;
let lines: Line[];
let appName: string;

async function until(probe: () => boolean | Promise<boolean>, what: string, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Ends the server side of the given connections of ours (all of them without pids), and waits until they are gone. */
async function terminate(pids?: number[]) {
  const { rows } = await admin.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND ($2::int[] IS NULL OR pid = ANY($2::int[]))',
    [appName, pids ?? null],
  );
  expect(rows.length).toBeGreaterThan(0);
  await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [rows.map((row) => row.pid)]);
  await until(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1::int[])', [rows.map((row) => row.pid)])).rowCount === 0, 'the backends to end');
}

const lossReported = () => lines.some((line) => line.level === 'warn' && /connection lost/.test(line.message));
const pidOf = async (query: () => Promise<{ pid: number }[]>) => (await query())[0].pid;

beforeAll(async () => {
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
afterAll(() => admin.end());

beforeEach(() => {
  lines = [];
  appName = `conn-loss-${randomUUID().slice(0, 8)}`;
  const sink = (level: string) => (_details: object, message: string) => void lines.push({ level, message });
  const target = new URL(url);
  target.searchParams.set('application_name', appName);
  db = createDb({ url: target.toString(), poolSize: 3, log: { info: sink('info'), warn: sink('warn'), error: sink('error') } });
});
afterEach(() => closeDb(db));

describe('a PostgreSQL connection that is terminated', () => {
  it('inside inTransaction, between two queries: the transaction fails as unavailable, the connection is discarded, the next query is served', async () => {
    let lostPid = 0;
    const failure = await inTransaction(db, async (sql) => {
      lostPid = (await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await terminate([lostPid]);
      await until(lossReported, 'the loss to be reported');
      await sql.query('SELECT 1');
    }).catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(Error);
    expect(isDbUnavailable(failure)).toBe(true);
    const { rows } = await db.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(rows[0].pid).not.toBe(lostPid);
    expect(db.pool.totalCount).toBe(1);
  });

  it('checked out and idle (no query running): the holder releases it, the pool drops it', async () => {
    const client = await db.pool.connect();
    const lostPid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    await terminate([lostPid]);
    await until(lossReported, 'the loss to be reported');
    client.release();

    expect(await pidOf(() => db.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)).not.toBe(lostPid);
  });

  it('inside a Prisma interactive transaction: the transaction fails as unavailable, the next query is served', async () => {
    let lostPid = 0;
    const failure = await db
      .$transaction(async (tx) => {
        lostPid = await pidOf(() => tx.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`);
        await terminate([lostPid]);
        await until(lossReported, 'the loss to be reported');
        await tx.$queryRaw`SELECT 1`;
      })
      .catch((error: unknown) => error);

    expect(isDbUnavailable(failure)).toBe(true);
    // The transaction's connection went back to the pool (which dropped it), rather than staying checked out.
    expect(db.pool.totalCount).toBe(db.pool.idleCount);
    expect(await pidOf(() => db.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)).not.toBe(lostPid);
  });

  it('idle in the pool, all at once: reported once, and both query paths reconnect', async () => {
    const client = await Promise.all([db.pool.connect(), db.pool.connect(), db.pool.connect()]);
    for (const each of client) each.release();
    expect(db.pool.idleCount).toBe(3);

    await terminate();
    await until(() => db.pool.totalCount === 0, 'the pool to drop its connections');

    expect(lines.filter((line) => line.level === 'warn')).toHaveLength(1);
    expect((await db.pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect(await db.$queryRaw`SELECT 1 AS one`).toEqual([{ one: 1 }]);
    expect(lines.map((line) => line.message)).toContain('PostgreSQL connection is back');
  });
});

describe('a Prisma transaction', () => {
  it('whose COMMIT is refused gives its connection back', async () => {
    const failure = await db
      .$transaction(async (tx) => {
        await tx.$executeRaw`CREATE TEMP TABLE refused (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP`;
        await tx.$executeRaw`INSERT INTO refused VALUES (1), (1)`;
      })
      .catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(Error);
    expect(db.pool.totalCount).toBe(db.pool.idleCount);
    expect(db.pool.totalCount).toBe(1);
  });
});
