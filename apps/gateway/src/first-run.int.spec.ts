import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, startCluster, startSentinelTopology } from '@operator/testing';
import { redisProblem } from '../../../tools/redis-check';

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
      `Redis is not reachable at 127.0.0.1:${port} (ECONNREFUSED): start it (redis-server, or with Docker: docker run -d -p 127.0.0.1:6379:6379 redis:7) or set REDIS_URL`,
    );
    expect(run.stdout).not.toMatch(/built|started/);
  });

  it('names the Sentinels it asked, in one line, when none answers', async () => {
    const port = await freePort();
    const run = await start({ DATABASE_URL: process.env.DATABASE_URL!, REDIS_SENTINELS: `127.0.0.1:${port}`, REDIS_SENTINEL_NAME: 'operator' });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toBe(
      `Redis is not reachable as the master operator through the Sentinels 127.0.0.1:${port} (no Sentinel named the master): start them or set REDIS_SENTINELS and REDIS_SENTINEL_NAME`,
    );
    expect(run.stdout).not.toMatch(/built|started/);
  });

  it('names the Cluster nodes it asked, and a Redis setting that is wrong, in one line', async () => {
    const port = await freePort();
    const cluster = await start({ DATABASE_URL: process.env.DATABASE_URL!, REDIS_CLUSTER_NODES: `127.0.0.1:${port}` });
    expect(cluster.code).toBe(1);
    expect(cluster.stderr.trim()).toBe(`Redis is not reachable as the Redis Cluster of 127.0.0.1:${port} (no node gave the slot map): start it or set REDIS_CLUSTER_NODES`);

    const unnamed = await start({ DATABASE_URL: process.env.DATABASE_URL!, REDIS_SENTINELS: `127.0.0.1:${port}` });
    expect(unnamed.code).toBe(1);
    expect(unnamed.stderr.trim()).toBe(
      'Redis is not configured right: REDIS_SENTINELS is set without REDIS_SENTINEL_NAME, the master group name the Sentinels monitor',
    );
  });
});

describe("npm start's Redis check", () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'operator-redis-check-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reaches the master through the Sentinels, and a Redis Cluster through its nodes', async () => {
    const sentinel = await startSentinelTopology({ dir: path.join(dir, 'sentinel') });
    const cluster = await startCluster({ dir: path.join(dir, 'cluster') }).catch(async (error) => {
      await sentinel.stop();
      throw error;
    });
    try {
      const dead = `redis://127.0.0.1:${await freePort()}`;
      expect(await redisProblem({ REDIS_URL: dead, REDIS_SENTINELS: sentinel.sentinelList, REDIS_SENTINEL_NAME: sentinel.masterName })).toBeNull();
      expect(await redisProblem({ REDIS_URL: dead, REDIS_CLUSTER_NODES: cluster.nodeList })).toBeNull();
    } finally {
      await sentinel.stop();
      await cluster.stop();
    }
  });
});
