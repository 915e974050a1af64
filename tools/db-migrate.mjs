// Creates the database named by DATABASE_URL if it is missing, then applies the migrations.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import pg from 'pg';

const require = createRequire(import.meta.url);
export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/operator_api';

export async function ensureDatabase(url, { recreate = false } = {}) {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
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

if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  await ensureDatabase(url);
  migrate(url);
  console.log('database is migrated');
}
