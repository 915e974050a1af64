import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

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
    expect(output).toMatch(/waiting: \d+ migration\(s\) not applied yet, the first \d+_init/);

    await node(['tools/db-migrate.mjs']);
    expect(await exited).toBe(0);
    expect(output).toContain('database is migrated');
  }, 60000);
});
