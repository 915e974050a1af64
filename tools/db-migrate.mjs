// Creates the database if missing, sets its session defaults, then applies the migrations; with
// --wait it only waits for them (init containers). MIGRATE_DATABASE_URL goes straight to the primary,
// not through a transaction pooler: a migration holds a session advisory lock.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import {
  applySessionSettings,
  checkDatabaseUrl,
  connectAdmin,
  DatabaseUnreachable,
  DatabaseUrlRefused,
  MIGRATION_SESSION_OPTIONS,
  withSessionOptions,
} from './pg-admin.cjs';

const require = createRequire(import.meta.url);
export { connectAdmin, DatabaseUnreachable, DatabaseUrlRefused };
export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/operator_api';

/** MIGRATE_DATABASE_URL, else DATABASE_URL, else the default, and which it was. */
export function migrationTarget(env = process.env) {
  if (env.MIGRATE_DATABASE_URL) return { url: env.MIGRATE_DATABASE_URL, variable: 'MIGRATE_DATABASE_URL' };
  return { url: env.DATABASE_URL || DEFAULT_DATABASE_URL, variable: 'DATABASE_URL' };
}

/** Creates the database when it is missing (anew with `recreate`), and sets its session defaults. */
export async function ensureDatabase(url, { recreate = false, variable = 'DATABASE_URL' } = {}) {
  const client = await connectAdmin(url, variable);
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  try {
    const quoted = `"${name.replace(/"/g, '""')}"`;
    if (recreate) await client.query(`DROP DATABASE IF EXISTS ${quoted} WITH (FORCE)`);
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${quoted}`);
    await applySessionSettings(client, name);
  } finally {
    await client.end();
  }
}

/** On a session of its own that no statement or idle timeout cuts short. */
export function migrate(url) {
  const cli = require.resolve('prisma/build/index.js');
  execFileSync(process.execPath, [cli, 'migrate', 'deploy'], {
    env: { ...process.env, DATABASE_URL: withSessionOptions(url, MIGRATION_SESSION_OPTIONS) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** An unreachable server or a refused URL ends the process with one line. */
export async function ensureDatabaseOrExit(url, variable = 'DATABASE_URL') {
  try {
    await ensureDatabase(url, { variable });
  } catch (error) {
    if (!(error instanceof DatabaseUnreachable) && !(error instanceof DatabaseUrlRefused)) throw error;
    console.error(error.message);
    process.exit(1);
  }
}

const MIGRATIONS = new URL('../prisma/migrations/', import.meta.url);

/** The migrations of prisma/migrations that the database has not applied (all, if it has no schema yet). */
export async function pendingMigrations(url) {
  const all = readdirSync(MIGRATIONS, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL');
    const applied = new Set(rows.map((row) => row.migration_name));
    return all.filter((name) => !applied.has(name));
  } catch (error) {
    if (error.code === '42P01') return all; // no _prisma_migrations table: nothing applied yet
    throw error;
  } finally {
    await client.end();
  }
}

/** Says why it waits, when the reason changes. */
export async function waitForMigrations(url, { intervalMs = 2000 } = {}) {
  const where = new URL(url);
  let said;
  for (;;) {
    const reason = await pendingMigrations(url).then(
      (pending) => (pending.length ? `${pending.length} migration(s) not applied yet, the first ${pending[0]}` : undefined),
      (error) => `database ${where.hostname}:${where.port || 5432}${where.pathname} not available (${error.code ?? error.message})`,
    );
    if (!reason) return;
    if (reason !== said) console.log(`waiting: ${reason}`);
    said = reason;
    await sleep(intervalMs);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { url, variable } = migrationTarget();
  try {
    checkDatabaseUrl(variable, url);
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
  if (process.argv.includes('--wait')) {
    await waitForMigrations(url);
    console.log('database is migrated');
  } else {
    await ensureDatabaseOrExit(url, variable);
    migrate(url);
    console.log('database is migrated');
  }
}
