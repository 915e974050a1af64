import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { PostgresPair } from './postgres-pair';
import { psql } from './postgres-processes';
import { until } from './until';

const root = path.join(__dirname, '../../..');

/** `url` naming database `name` instead. */
export function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/**
 * A database made on the pair's primary and migrated there (tools/db-migrate.mjs), once the standby
 * has replayed it: its URL on each server.
 */
export async function migratedPairDatabase(pair: PostgresPair, name: string): Promise<{ primaryUrl: string; standbyUrl: string }> {
  await psql(pair.primaryUrl, `CREATE DATABASE "${name}"`);
  const primaryUrl = withDatabase(pair.primaryUrl, name);
  execFileSync(process.execPath, ['--input-type=module', '-e', `import { migrate } from './tools/db-migrate.mjs'; migrate(${JSON.stringify(primaryUrl)});`], { cwd: root, stdio: 'ignore' });
  const standbyUrl = withDatabase(pair.standbyUrl, name);
  const [applied] = await psql(primaryUrl, 'SELECT count(*) FROM _prisma_migrations');
  await until(async () => (await psql(standbyUrl, 'SELECT count(*) FROM _prisma_migrations').catch(() => []))[0] === applied, 'the standby to replay the migrations', 30000);
  return { primaryUrl, standbyUrl };
}
