// `npm run bench`: how fast the stack accepts and sends pushes on this machine, against the real
// PostgreSQL and Redis. Runs the built gateway on its own database and queue prefix, prints
// throughput and latency for batches, singles and retried batches, then starts the FCM worker (its
// sandbox: no network) on the queued jobs and times how fast the deliveries are recorded as sent.
// Sized for a 2-core box.
import { spawn, execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ensureDatabase, migrate } from './db-migrate.mjs';

const PORT = Number(process.env.BENCH_PORT || 3900);
const PLAYERS = Number(process.env.BENCH_PLAYERS || 2000);
const BATCHES = Number(process.env.BENCH_BATCHES || 20);
const BATCH_SIZE = Number(process.env.BENCH_BATCH_SIZE || 500);
const SINGLES = Number(process.env.BENCH_SINGLES || 2000);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_bench';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const PREFIX = `bench-${Date.now()}`;
const BASE = `http://127.0.0.1:${PORT}`;
const BRAND = 7;

await ensureDatabase(DATABASE_URL, { recreate: true });
migrate(DATABASE_URL);
execFileSync(process.execPath, ['tools/build.mjs', 'gateway', 'push-worker-fcm'], { stdio: 'inherit' });

const appEnv = { ...process.env, DATABASE_URL, REDIS_URL, QUEUE_PREFIX: PREFIX, LOG_LEVEL: 'warn' };
const gateway = spawn(process.execPath, [...(process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.BENCH_PROFILE] : []), 'dist/apps/gateway/main.js'], {
  env: { ...appEnv, PORT: String(PORT), HOST: '127.0.0.1', MAX_EVENT_LOOP_DELAY_MS: '0' },
  stdio: ['ignore', 'inherit', 'inherit'],
});

async function waitReady() {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${BASE}/health/ready`)).ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('gateway did not become ready');
}

async function post(path, body, key = 'dev-operator-key') {
  const started = performance.now();
  const response = await fetch(`${BASE}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify(body) });
  const json = await response.json();
  if (response.status >= 300) throw new Error(`${path} answered ${response.status}: ${JSON.stringify(json)}`);
  return { ms: performance.now() - started, json };
}

/** Runs `count` tasks with at most `concurrency` in flight; answers their results and the wall time. */
async function run(count, concurrency, task) {
  const results = new Array(count);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return { results, seconds: (performance.now() - started) / 1000 };
}

const pct = (values, p) => values.slice().sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))].toFixed(1);

let nextId = randomInt(1, 2 ** 40);
const message = (i) => ({
  activity: { id: nextId++, brand_id: BRAND, user_id: `player-${i % PLAYERS}`, activity_id: 55, action_group_id: 2, trigger_hash: 'bench', action_id: 3 },
  title: 'Weekend reload',
  body: 'Your 50 free spins are waiting',
  android: { priority: 'high', channel_id: 'promos' },
  meta: { campaign: 'bench', n: i },
});

try {
  await waitReady();
  await run(PLAYERS, 20, (i) =>
    post('/v1/devices', { user_id: `player-${i}`, brand_id: BRAND, provider: 'fcm', platform: 'android', token: `bench-token-${PREFIX}-${i}` }, 'dev-internal-key'),
  );

  const batches = Array.from({ length: BATCHES }, (_, b) => Array.from({ length: BATCH_SIZE }, (_, i) => message(b * BATCH_SIZE + i)));
  const batch = await run(BATCHES, 4, (b) => post('/channels/push/batch', batches[b]));
  const accepted = batch.results.reduce((sum, r) => sum + r.json.successful.length, 0);

  const retry = await run(BATCHES, 4, (b) => post('/channels/push/batch', batches[b]));
  const single = await run(SINGLES, 32, (i) => post('/channels/push/single', message(i)));

  // Sending: the FCM worker (sandbox) takes the queued jobs; time until every delivery is recorded.
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  const pending = async () => Number((await db.query(`SELECT count(*) FROM deliveries WHERE status <> 'sent'`)).rows[0].count);
  const toSend = await pending();
  const sendStarted = performance.now();
  const worker = spawn(process.execPath, ['dist/apps/push-worker-fcm/main.js'], { env: appEnv, stdio: ['ignore', 'ignore', 'inherit'] });
  while ((await pending()) > 0) await new Promise((resolve) => setTimeout(resolve, 50));
  const sendSeconds = (performance.now() - sendStarted) / 1000;
  worker.kill('SIGTERM');
  await db.end();

  const lines = [
    ['batch', `${BATCHES} x ${BATCH_SIZE} messages, 4 in flight`, `${(accepted / batch.seconds).toFixed(0)} messages/s`, batch.results.map((r) => r.ms)],
    ['batch resent', 'same batches again (all duplicates)', `${((BATCHES * BATCH_SIZE) / retry.seconds).toFixed(0)} messages/s`, retry.results.map((r) => r.ms)],
    ['single', `${SINGLES} requests, 32 in flight`, `${(SINGLES / single.seconds).toFixed(0)} requests/s`, single.results.map((r) => r.ms)],
  ];
  console.log(`\naccepted ${accepted} of ${BATCHES * BATCH_SIZE} batch messages`);
  console.log(`sent ${toSend} deliveries through the FCM worker (sandbox, default concurrency) in ${sendSeconds.toFixed(1)} s: ${(toSend / sendSeconds).toFixed(0)} deliveries/s, worker start included\n`);
  console.log('scenario      | load                                  | throughput          | p50 ms | p99 ms');
  for (const [name, load, rate, ms] of lines) {
    console.log(`${name.padEnd(13)} | ${load.padEnd(37)} | ${rate.padEnd(19)} | ${pct(ms, 50).padStart(6)} | ${pct(ms, 99).padStart(6)}`);
  }
} finally {
  gateway.kill('SIGTERM');
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${PREFIX}:*`);
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
  redis.disconnect();
}
