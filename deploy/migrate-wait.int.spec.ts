import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

// Needs PostgreSQL. `db-migrate.mjs --wait` (the apps' init containers) returns only once the
// migration (the Job) has applied every migration. Its database is made anew at each run.

const ROOT = join(__dirname, '..');
const url = new URL(process.env.DATABASE_URL!);
url.pathname = `${url.pathname}_migrate_wait`;
const node = (args: string[]) => promisify(execFile)(process.execPath, args, { cwd: ROOT, env: { ...process.env, DATABASE_URL: url.toString() } });

describe('db-migrate.mjs --wait', () => {
  beforeAll(() =>
    node(['--input-type=module', '-e', `import { ensureDatabase } from './tools/db-migrate.mjs'; await ensureDatabase(${JSON.stringify(url.toString())}, { recreate: true });`]),
  );

  it('waits while the database is not migrated, and ends once it is', async () => {
    const waiter = spawn(process.execPath, ['tools/db-migrate.mjs', '--wait'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: url.toString() } });
    let output = '';
    waiter.stdout.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => waiter.on('exit', resolve));

    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(waiter.exitCode).toBeNull();
    expect(output).toMatch(/waiting: \d+ migration\(s\) not applied yet, the first \d+_baseline/);

    await node(['tools/db-migrate.mjs']);
    expect(await exited).toBe(0);
    expect(output).toContain('database is migrated');
  }, 60000);
});

// MIGRATE_DATABASE_URL is the migration's own, direct connection: the apps' DATABASE_URL may go
// through a transaction pooler. The migration sets the session defaults the apps rely on, on the
// database (a pooler refuses them as startup parameters), and is not bound by them itself.
describe('db-migrate.mjs with MIGRATE_DATABASE_URL', () => {
  const target = new URL(process.env.DATABASE_URL!);
  target.pathname = `${target.pathname}_migrate_direct`;
  const name = decodeURIComponent(target.pathname.slice(1));
  const admin = new URL(process.env.DATABASE_URL!);
  admin.pathname = '/postgres';
  // Nothing listens there: the apps' URL is not what the migration uses.
  const unreachable = 'postgresql://postgres@127.0.0.1:1/operator_api_nowhere';
  const migrateDirect = (args: string[] = []) =>
    promisify(execFile)(process.execPath, ['tools/db-migrate.mjs', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: unreachable, MIGRATE_DATABASE_URL: target.toString() } });

  async function query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    try {
      return (await client.query<R>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  beforeAll(() => query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  afterAll(() => query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));

  it('creates and migrates that database, sets its session defaults, and runs unbound by them', async () => {
    await query(`CREATE DATABASE "${name}"`);
    // A statement timeout no migration statement could meet, for this user in this database only
    // (a role's setting in a database outranks the database's own).
    await query(`ALTER ROLE CURRENT_USER IN DATABASE "${name}" SET statement_timeout = '1ms'`);

    expect((await migrateDirect()).stdout).toContain('database is migrated');
    const settings = await query<{ setconfig: string[] }>(
      'SELECT setconfig FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = $1 AND s.setrole = 0',
      [name],
    );
    expect(settings).toEqual([{ setconfig: expect.arrayContaining(['statement_timeout=10s', 'idle_in_transaction_session_timeout=40s', 'jit=off']) }]);
  }, 60000);
});
