// Creates the database named by DATABASE_URL if it is missing, then applies the migrations.
// With --wait it changes nothing: it waits until every migration has been applied (the apps' init
// containers on Kubernetes, while the migration Job runs).
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { connectAdmin, DatabaseUnreachable } from './pg-admin.cjs';

const require = createRequire(import.meta.url);
export { connectAdmin, DatabaseUnreachable };
export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/operator_api';

export async function ensureDatabase(url, { recreate = false } = {}) {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const client = await connectAdmin(url);
  try {
    const quoted = `"${name.replace(/"/g, '""')}"`;
    if (recreate) await client.query(`DROP DATABASE IF EXISTS ${quoted} WITH (FORCE)`);
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${quoted}`);
  } finally {
    await client.end();
  }
}

export function migrate(url) {
  const cli = require.resolve('prisma/build/index.js');
  execFileSync(process.execPath, [cli, 'migrate', 'deploy'], {
    env: { ...process.env, DATABASE_URL: url },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** ensureDatabase for a command line: an unreachable server ends the process with one line. */
export async function ensureDatabaseOrExit(url) {
  try {
    await ensureDatabase(url);
  } catch (error) {
    if (!(error instanceof DatabaseUnreachable)) throw error;
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

/** Returns once every migration is applied; until then says why it waits, when the reason changes. */
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
  const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  if (process.argv.includes('--wait')) {
    await waitForMigrations(url);
    console.log('database is migrated');
  } else {
    await ensureDatabaseOrExit(url);
    migrate(url);
    console.log('database is migrated');
  }
}
