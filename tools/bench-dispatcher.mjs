// The webhook dispatcher alone: `events` push status events wait in the outbox, and the dispatcher,
// bundled and run as its own process, posts them to a local receiver that answers 200 at once.
// Answers the time from its start until the receiver had every one, and the CPU each side spent per
// event from the first event's arrival to the last's (/proc: the dispatcher, its PostgreSQL backends,
// this process, which is the receiver) with pg_stat_statements' time in the bench database when the
// server loads it. --batch N runs again with CRM_STATUS_WEBHOOK_BATCH_MAX=N, over events of its own.
//
//   node tools/bench-dispatcher.mjs [events] [--batch N]   (BENCH_DATABASE_URL, WEBHOOK_* as for the app;
//   BENCH_CPU_PROF=<dir> for the dispatcher's CPU profiles)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
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

/** User and kernel CPU of a process in ms, from /proc (0 elsewhere or once it is gone). */
function cpuMsOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** CPU of every PostgreSQL process by pid: those of the bench database are picked out at the end. */
function postgresCpu() {
  const cpu = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') cpu.set(Number(entry), cpuMsOf(entry));
    } catch {
      // Gone in between.
    }
  }
  return cpu;
}

/** The CPU counters the run is measured with; `child` is the dispatcher. */
function sampleCpu(child) {
  const own = process.cpuUsage();
  return { dispatcher: cpuMsOf(child.pid), postgres: postgresCpu(), receiver: (own.user + own.system) / 1000 };
}

/** pg_stat_statements' time (plan and execution) and calls in this database, when the server loads it. */
async function statementTimes(client) {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const { rows } = await client.query(
      `SELECT coalesce(sum(total_exec_time + total_plan_time), 0)::float8 AS ms, coalesce(sum(calls), 0)::float8 AS calls
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    return rows[0];
  } catch {
    return undefined;
  }
}

function startReceiver(expected, onFirst) {
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
          if (!seen.size) {
            first.at = performance.now();
            onFirst?.();
          }
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
  let child;
  /** CPU counters at the first event's arrival. */
  let before;
  const receiver = await startReceiver(ids, () => (before = sampleCpu(child)));
  const stats = new pg.Client({ connectionString: databaseUrl });
  await stats.connect();
  const statementsBefore = await statementTimes(stats);
  const started = performance.now();
  // BENCH_CPU_PROF=<dir>: the dispatcher writes its CPU profile there when it exits.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  child = spawn(process.execPath, [...profile, APP], {
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
    const after = sampleCpu(child);
    const { rows } = await stats.query('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
    // A backend that began after the first sample counts whole.
    const postgres = rows.reduce((sum, { pid }) => sum + (after.postgres.get(pid) ?? 0) - (before.postgres.get(pid) ?? 0), 0);
    const statementsAfter = await statementTimes(stats);
    // Per event from the first arrival on: the first event is not counted.
    const per = (ms) => (ms * 1000) / (events - 1);
    const cpu = {
      dispatcherUs: per(after.dispatcher - before.dispatcher),
      postgresUs: per(postgres),
      receiverUs: per(after.receiver - before.receiver),
      statementsUs: statementsBefore && statementsAfter ? (1000 * (statementsAfter.ms - statementsBefore.ms)) / events : undefined,
      statementsPerEvent: statementsBefore && statementsAfter ? (statementsAfter.calls - statementsBefore.calls) / events : undefined,
    };
    return { events, batch, seconds: (ended - started) / 1000, postingSeconds: (ended - receiver.first.at) / 1000, cpu };
  } finally {
    clearTimeout(timer);
    await stats.end();
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
    const { cpu } = result;
    const statements =
      cpu.statementsUs === undefined ? '' : `; statements ${cpu.statementsUs.toFixed(1)} µs, ${cpu.statementsPerEvent.toFixed(2)} calls (pg_stat_statements, from the start)`;
    console.log(
      `  CPU per event from the first post: dispatcher ${cpu.dispatcherUs.toFixed(0)} µs, PostgreSQL ${cpu.postgresUs.toFixed(0)} µs, receiver ${cpu.receiverUs.toFixed(0)} µs${statements}`,
    );
  }
}
