// The webhook dispatcher alone: `events` push status events wait in the outbox, and the dispatcher,
// bundled and run as its own process, posts them to a local receiver that answers 200 at once.
// Answers the time from its start until the receiver had every one. --batch N runs again with
// CRM_STATUS_WEBHOOK_BATCH_MAX=N, over events of its own.
//
//   node tools/bench-dispatcher.mjs [events] [--batch N]   (BENCH_DATABASE_URL, WEBHOOK_* as for the app;
//   BENCH_CPU_PROF=<dir> for the dispatcher's CPU profiles)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { bundle } from './bundle.mjs';
import { dayOf, makeDayPartitions } from './day-partitions.mjs';
import { ensureDatabase, migrate } from './db-migrate.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const APP = 'dist/tools/bench-dispatcher/webhook-dispatcher.js';

/**
 * One message and its `sent` event per push, for a brand of its own, 50,000 to a transaction (a
 * transaction holds at most 65,536 events: events_feed_position()); answers the event ids. Today's
 * partitions are made first, as the dispatcher makes them when it starts.
 */
async function insertPending(client, events) {
  await makeDayPartitions(client, dayOf(Date.now() - 86_400_000), dayOf(Date.now() + 86_400_000));
  const brand = 800_000_000 + Math.floor(Math.random() * 99_999_999);
  const salt = randomBytes(4).toString('hex');
  const ids = new Set();
  for (let first = 0; first < events; first += 50_000) {
    for (const id of await insertChunk(client, brand, salt, first, Math.min(50_000, events - first))) ids.add(id);
  }
  return ids;
}

async function insertChunk(client, brand, salt, first, count) {
  const { rows } = await client.query(
    `WITH m AS (
       INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash,
                             payload, meta, crm_headers, status)
       SELECT id, uuid_v7_day(id), $1, i, 'bench-player-' || (i % 1000), 71, 72, 73, 'th-' || $2 || '-' || i,
              '{}'::json, '{"campaign": "bench"}'::json, '{}'::jsonb, 'sent'
         FROM (SELECT uuid_v7() AS id, i FROM generate_series($4::int + 1, $4::int + $3::int) AS i) g
       RETURNING id)
     INSERT INTO events (id, topic, ordering_key, push_id, status)
     SELECT gen_random_uuid(), 'push.status', m.id::text, m.id, 'sent' FROM m
     RETURNING id`,
    [brand, salt, count, first],
  );
  return rows.map((row) => row.id);
}

function startReceiver(expected) {
  const seen = new Set();
  /** When the first of the expected events arrived (performance.now()). */
  const first = { at: 0 };
  let resolveAll;
  const all = new Promise((resolve) => (resolveAll = resolve));
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      response.end('ok');
      const body = JSON.parse(Buffer.concat(chunks).toString());
      for (const { event_id: id } of Array.isArray(body) ? body : [body]) {
        if (expected.has(id) && !seen.has(id)) {
          if (!seen.size) first.at = performance.now();
          seen.add(id);
          if (seen.size === expected.size) resolveAll();
        }
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port, all, seen, first, close: () => new Promise((done) => server.close(done)) })),
  );
}

/**
 * Inserts `events` pending push status events into the (migrated) database at `databaseUrl`, runs
 * the dispatcher against a local receiver until every one arrived, and answers how long it took
 * (`seconds`, from its start) and how long it posted (`postingSeconds`, from the first event that
 * arrived: `seconds` less the process's start, its connections and its first claim).
 * `batch`: CRM_STATUS_WEBHOOK_BATCH_MAX (1: one event per POST).
 */
export async function benchDispatcher({ databaseUrl, events = 20_000, batch = 1, env = {}, timeoutMs = 600_000 }) {
  await bundle('apps/webhook-dispatcher/src/main.ts', `${ROOT}/${APP}`);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  let ids;
  try {
    ids = await insertPending(client, events);
    await client.query('ANALYZE events');
  } finally {
    await client.end();
  }
  const receiver = await startReceiver(ids);
  const started = performance.now();
  // BENCH_CPU_PROF=<dir>: the dispatcher writes its CPU profile there when it exits.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profile, APP], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      METRICS_PORT: '0',
      CRM_STATUS_WEBHOOK_BATCH_MAX: String(batch),
      ...env,
      DATABASE_URL: databaseUrl,
      CRM_STATUS_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/push-status`,
    },
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let timer;
  try {
    await Promise.race([
      receiver.all,
      exited.then((code) => Promise.reject(new Error(`the dispatcher exited (${code}) before it posted every event`))),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${receiver.seen.size} of ${events} events posted in time`)), timeoutMs))),
    ]);
    const ended = performance.now();
    return { events, batch, seconds: (ended - started) / 1000, postingSeconds: (ended - receiver.first.at) / 1000 };
  } finally {
    clearTimeout(timer);
    child.kill('SIGTERM');
    await exited;
    await receiver.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const databaseUrl = process.env.BENCH_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_bench_dispatcher';
  const args = process.argv.slice(2);
  const at = args.indexOf('--batch');
  const batch = at >= 0 ? Number(args.splice(at, 2)[1]) : 1;
  if (!Number.isInteger(batch) || batch < 1) throw new Error('--batch takes a whole number of events, 1 or more');
  const events = Number(args[0] ?? 20_000);
  for (const size of batch > 1 ? [1, batch] : [1]) {
    // A fresh database for each: the first run's delivered events would slow the second's claims.
    await ensureDatabase(databaseUrl, { recreate: true });
    migrate(databaseUrl);
    const result = await benchDispatcher({ databaseUrl, events, batch: size });
    const how = size > 1 ? `batched by ${size}` : 'one per POST';
    console.log(
      `${how}: ${result.events} events in ${result.seconds.toFixed(2)} s: ${(result.events / result.seconds).toFixed(0)} events/s; ` +
        `${(result.events / result.postingSeconds).toFixed(0)} events/s from the first post, ${(result.seconds - result.postingSeconds).toFixed(2)} s after the start`,
    );
  }
}
