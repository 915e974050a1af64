import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, startCluster, startSentinelTopology, uniqueName, until } from '@operator/testing';
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

describe('npm start in development', () => {
  it('prints, once every app is ready, where the API, its documentation, the queue dashboard and each app are, the keys and a first push', async () => {
    const port = await freePort();
    // A database of its own: npm start creates it, migrates it and seeds sample bonuses there.
    const database = new URL(process.env.DATABASE_URL!);
    database.pathname = `/operator_api_test_first_run`;
    const child = spawn(process.execPath, ['tools/start.mjs'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_ENV: 'development', DATABASE_URL: database.href, PORT: String(port), HOST: '127.0.0.1', METRICS_PORT: '0', QUEUE_PREFIX: uniqueName('first-run'), LOG_LEVEL: 'warn' },
    });
    let stdout = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
    try {
      await until(() => /CRM Operator API is ready/.test(stdout) && stdout.trimEnd().endsWith('Ctrl-C stops everything.'), 'the orientation block', 150000);
      const api = `http://localhost:${port}`;
      const block = stdout.slice(stdout.indexOf('CRM Operator API is ready'));
      expect(block).toContain(`API                ${api}\n`);
      expect(block).toContain(`API documentation  ${api}/docs\n`);
      expect(block).toContain(`Queue dashboard    ${api}/admin/queues\n`);
      expect(block).toContain(`    gateway                ${api}/metrics   ${api}/health/ready`);
      // The other apps took free ports (METRICS_PORT=0): said so, for each of them.
      for (const app of ['push-worker-fcm', 'push-worker-hms', 'push-worker-onesignal', 'bonus', 'webhook-dispatcher']) {
        expect(block).toMatch(new RegExp(`    ${app} +a free port \\(METRICS_PORT=0\\)`));
      }
      expect(block).toContain("the CRM's          dev-operator-key");
      expect(block).toContain("your back end's    dev-internal-key");
      // Not on a terminal, the apps' log lines stay JSON.
      expect(stdout.split('\n').filter((line) => line.startsWith('{')).every((line) => typeof JSON.parse(line) === 'object')).toBe(true);
      // What it points at answers: the documentation page, and the first push it gives.
      expect((await fetch(`${api}/docs`)).status).toBe(200);
      const curls = /^    (curl .*)$/m.exec(block)![1];
      const [register, push] = curls.split(' && echo && ').map((line) => ({
        url: /curl -s (\S+)/.exec(line)![1],
        key: /X-Api-Key: ([^']+)'/.exec(line)![1],
        body: /-d '(.*)'$/.exec(line)![1],
      }));
      const post = ({ url, key, body }: typeof register) => fetch(url, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body });
      expect([200, 201]).toContain((await post(register)).status);
      expect(await (await post(push)).json()).toEqual({ push_id: expect.any(String) });
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  }, 200000);
});
