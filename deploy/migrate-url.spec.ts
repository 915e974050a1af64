import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { multiHostProblem } from '@operator/config';

// The migration tool refuses a PostgreSQL URL that lists several hosts with the one line the apps
// give (libs/config), before connecting anywhere, instead of failing on "Invalid URL".

const ROOT = join(__dirname, '..');
const MULTI_HOST = 'postgresql://app:secret@db-1.internal:5432,db-2.internal:5432/operator_api?target_session_attrs=read-write';

function migrateTool(env: Record<string, string>, args: string[] = []) {
  const { MIGRATE_DATABASE_URL: _m, DATABASE_URL: _d, ...rest } = process.env;
  return spawnSync(process.execPath, ['tools/db-migrate.mjs', ...args], { cwd: ROOT, env: { ...rest, ...env }, encoding: 'utf8', timeout: 20000 });
}

describe('db-migrate.mjs and a URL of several hosts', () => {
  it.each([
    ['MIGRATE_DATABASE_URL', [] as string[]],
    ['MIGRATE_DATABASE_URL', ['--wait']],
    ['DATABASE_URL', []],
    ['DATABASE_URL', ['--wait']],
  ])('refuses %s %j in one line that names the variable and what to use instead', (variable, args) => {
    const run = migrateTool({ [variable]: MULTI_HOST }, args);
    expect(run.status).toBe(1);
    expect(run.stderr.trim()).toBe(multiHostProblem(variable, MULTI_HOST));
    expect(run.stderr).not.toContain('secret');
    expect(run.stdout).toBe('');
  });

  it('refuses the libpq host list in the query too', () => {
    const run = migrateTool({ MIGRATE_DATABASE_URL: 'postgresql://app@/operator_api?host=db-1,db-2' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('MIGRATE_DATABASE_URL lists several hosts');
  });
});
