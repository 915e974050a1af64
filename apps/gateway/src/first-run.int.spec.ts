import { execFile } from 'node:child_process';
import path from 'node:path';
import { freePort } from '@operator/testing';

// `npm start` on a machine where PostgreSQL or Redis is not there yet: one line that says which
// store, where it looked and how to start it; no stack trace, no app started.
const ROOT = path.resolve(__dirname, '../../..');

function start(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['tools/start.mjs'], { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

describe('npm start without its stores', () => {
  it('names PostgreSQL, its address and how to start it, in one line', async () => {
    const port = await freePort();
    const run = await start({ DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/operator_api` });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toBe(
      `PostgreSQL is not reachable at 127.0.0.1:${port}: start it (with Docker: docker compose up -d postgres) or set DATABASE_URL`,
    );
    expect(run.stdout).toBe('');
  });

  it('names Redis, its address and how to start it, in one line, before building or starting anything', async () => {
    const port = await freePort();
    const run = await start({ DATABASE_URL: process.env.DATABASE_URL!, REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toBe(
      `Redis is not reachable at 127.0.0.1:${port} (ECONNREFUSED): start it (with Docker: docker compose up -d redis) or set REDIS_URL`,
    );
    expect(run.stdout).not.toMatch(/built|started/);
  });
});
