// `npm run bench`: each stage of the stack on this machine, as built apps against the real stores,
// with local provider servers and CRM; taken again with millions of old rows in the tables.
// `npm run bench -- --campaign N` runs one campaign of N one-device messages end to end instead,
// with each process's memory over the run (campaign.ts).
import { fork } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { apnsToken, fcmToken, freePort, hmsToken, oneSignalSubscriptionId } from '@operator/testing';
import { DELIVERIES_TO_SEND_SQL, SENDING_STATE_SQL } from '../../libs/db/src/to-send';
import { Providers } from '../chaos/providers';
import { each, load, type Request } from './load';
import { appStarter, LocalReceiver, stopApp, waitUntil } from './processes';
import { cpuBetween, cpuPer, sampleCpu } from './cpu';
import { FAR_DELAY_MS, FAR_SENDS, farSend, type FarSendDeps } from './far-send';
import { complianceStage, GATE_ROWS, type ComplianceDeps } from './compliance';
import { beginCost, costRows, dispatcherFigures, retentionCost } from './pg-cost';
import { campaign } from './campaign';

const env = process.env;
const SECONDS = Number(env.BENCH_SECONDS || 10);
const CONNECTIONS = Number(env.BENCH_CONNECTIONS || 50);
const PLAYERS = Number(env.BENCH_PLAYERS || 5000);
const BATCHES = Number(env.BENCH_BATCHES || 120);
const BATCH_SIZE = Number(env.BENCH_BATCH_SIZE || 500);
const SEND = Number(env.BENCH_SEND || 20000);
const END_TO_END = Number(env.BENCH_END_TO_END || 50000);
const E2E_WEBHOOK_BATCH = Number(env.BENCH_E2E_WEBHOOK_BATCH || 100);
/** BENCH_E2E_SINGLES=1: the end to end posts its messages as singles on CONNECTIONS connections, where it posts batches of 500. */
const E2E_SINGLES = env.BENCH_E2E_SINGLES === '1';
const OLD_ROWS = Number(env.BENCH_OLD_ROWS ?? 5_000_000);
const DATABASE_URL = env.BENCH_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_bench';
const REDIS_URL = env.REDIS_URL || 'redis://127.0.0.1:6379';
const CAMPAIGN_ARG = process.argv.indexOf('--campaign');
const CAMPAIGN = CAMPAIGN_ARG < 0 ? 0 : Number(process.argv[CAMPAIGN_ARG + 1]);
const BRAND = 7;
const OPERATOR = { 'x-api-key': 'dev-operator-key' };
const INTERNAL = { 'x-api-key': 'dev-internal-key' };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const count = async (sql: string) => Number((await pool.query(sql)).rows[0].count);
/** Cheap whatever is queued, where a count of what is left would read every open push. */
const sending = async () => (await pool.query<{ started: boolean; done: boolean }>(SENDING_STATE_SQL)).rows[0];
const log = (line: string) => console.log(`bench: ${line}`);

class Receiver extends LocalReceiver {
  readonly sent = new Set<string>();
  events = 0;
  protected readonly server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      this.events += 1;
      try {
        const parsed = JSON.parse(body) as { push_id?: string; status?: string } | { push_id?: string; status?: string }[];
        for (const event of Array.isArray(parsed) ? parsed : [parsed]) if (event.status === 'sent' && event.push_id) this.sent.add(event.push_id);
      } catch {
        // Counted; not a push status.
      }
      res.end('{"message":"success"}');
    });
  });
}

const start = (name: string, extra: Record<string, string>, nodeArgs?: string[]) => appStarter(appEnv)(name, extra, nodeArgs);
/** BENCH_CPU_PROF=<dir>: the app writes its CPU profile there when it stops (as the far-send stage's workers do theirs). */
const profiled = (name: string) =>
  env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${env.BENCH_CPU_PROF}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`] : [];
const stop = stopApp;
const until = (probe: () => Promise<boolean>, what: string, ms?: number) => waitUntil(probe, what, ms, 100);

let nextId = randomInt(1, 2 ** 40);
const message = (userId: string, n: number) => ({
  activity: { id: nextId++, brand_id: BRAND, user_id: userId, activity_id: 55, action_group_id: 2, trigger_hash: 'bench', action_id: 3 },
  title: 'Weekend reload',
  body: 'Your 50 free spins are waiting',
  android: { priority: 'high', channel_id: 'promos' },
  ios: { badge: '1' },
  meta: { campaign: 'bench', n },
});
const fcmPlayer = (i: number) => `fcm-player-${i % PLAYERS}`;
const apnsPlayer = (i: number) => `apns-player-${i % PLAYERS}`;
const hmsPlayer = (i: number) => `hms-player-${i % PLAYERS}`;
const oneSignalPlayer = (i: number) => `onesignal-player-${i % PLAYERS}`;
const batchesOf = (total: number, player: (i: number) => string): Request[] =>
  Array.from({ length: Math.ceil(total / BATCH_SIZE) }, (_, b) => ({
    path: '/channels/push/batch',
    headers: OPERATOR,
    body: JSON.stringify(Array.from({ length: Math.min(BATCH_SIZE, total - b * BATCH_SIZE) }, (_, i) => message(player(b * BATCH_SIZE + i), i))),
  }));

const dir = mkdtempSync(join(tmpdir(), 'operator-bench-'));
// The seeded rows are 1 to 31 days old: a retention of 32 days keeps them all.
const appEnv: NodeJS.ProcessEnv = { ...env, NODE_ENV: 'development', DATABASE_URL, REDIS_URL, QUEUE_PREFIX: `bench-${Date.now()}`, LOG_LEVEL: 'warn', RETENTION_DAYS: '32', METRICS_PORT: '0' };
const SETTLED = `COALESCE(LEAST((SELECT position FROM dispatch_cursors WHERE topic = 'push.status'),
    (SELECT min(after_position) FROM dispatch_ranges WHERE topic = 'push.status')), 0)`;
const PENDING_EVENTS = `SELECT (SELECT count(*) FROM events e WHERE e.topic = 'push.status' AND e.feed_seq > ${SETTLED})
  + (SELECT count(*) FROM dispatch_retries WHERE topic = 'push.status' AND state = 'pending') AS count`;
// Polled ten times a second: stops at the first event, where a count would read every one.
const ANY_PENDING_EVENT = `SELECT ((SELECT e.feed_seq FROM events e WHERE e.topic = 'push.status' AND e.feed_seq > ${SETTLED} ORDER BY e.feed_seq LIMIT 1) IS NOT NULL
  OR EXISTS (SELECT 1 FROM dispatch_retries WHERE topic = 'push.status' AND state = 'pending'))::int AS count`;

/** A stage's rate as a multiple of the bare app's req/s in the same pass: the figure compared across runs. */
const timesBaseline = (rate: number, bare: number) => `${(rate / bare).toFixed(2)}x the baseline`;

interface Row {
  stage: string;
  load: string;
  figures: string[];
  rates: number[];
}

/** A single push to the next FCM player, as the bare baseline and the singles stage post it. */
const single = (headers?: Record<string, string>): Request => ({ path: '/channels/push/single', headers, body: JSON.stringify(message(fcmPlayer(nextId), 0)) });

/** The singles stage's load: SECONDS of single pushes on CONNECTIONS connections. */
const loadSingles = (port: number) => load(port, CONNECTIONS, SECONDS, () => single(OPERATOR));

/** The bare app's req/s, and the CPU it and the load generator took per request. */
async function baseline(): Promise<{ rate: number; text: string }> {
  const port = await freePort();
  const bare = fork('dist/tools/bench/bare.js', [], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  await new Promise((resolve) => bare.once('message', resolve));
  const cpu = sampleCpu({ 'bare app': bare.pid });
  const result = await load(port, CONNECTIONS, SECONDS, () => single());
  const used = cpuBetween(cpu, sampleCpu({ 'bare app': bare.pid }));
  await stop(bare);
  return { rate: result.perSecond, text: `${result.perSecond.toFixed(0)} req/s; CPU per request: ${cpuPer(used, result.requests, 'load generator')}` };
}

const farDeps = (gatewayPort: number): FarSendDeps => ({
  dir,
  appEnv,
  accept: async (provider, total) => void (await each(gatewayPort, 4, batchesOf(total, provider === 'fcm' ? fcmPlayer : apnsPlayer))),
  toSend: () => count(DELIVERIES_TO_SEND_SQL),
  sending,
});
const gateDeps = (gatewayPort: number, providers: Providers): ComplianceDeps => ({
  appEnv,
  workerEnv: providers.workerEnv(),
  register: async (players) =>
    void (await each(
      gatewayPort,
      16,
      players.map((userId) => ({ path: '/v1/devices', headers: INTERNAL, body: JSON.stringify({ user_id: userId, brand_id: BRAND, provider: 'fcm', platform: 'android', token: fcmToken() }) })),
    )),
  accept: async (players) => void (await each(gatewayPort, 4, batchesOf(players.length, (i) => players[i]))),
  sending,
});
const ACCEPT_ROWS: [string, string, 'singles' | 'batches' | 'floor'][] = [
  ['singles', `POST /channels/push/single, ${CONNECTIONS} connections, ${SECONDS} s`, 'singles'],
  ['batches', `${BATCHES} x ${BATCH_SIZE} messages, 4 in flight`, 'batches'],
  ['PostgreSQL floor', `${BATCHES} x ${BATCH_SIZE}-row inserts of the batches' message JSON into (id uuid primary key, body json), one connection`, 'floor'],
];
const SEND_ROWS: [string, string, 'sandbox' | 'fcm' | 'apns' | 'hms' | 'onesignal'][] = [
  ['send: sandbox', 'FCM worker, queued jobs drained', 'sandbox'],
  ['send: fake FCM', `${SEND} messages, FCM HTTP v1 over HTTP/2 and TLS`, 'fcm'],
  ['send: fake APNs', `${SEND} messages, HTTP/2 over TLS`, 'apns'],
  ['send: fake HMS', `${SEND} messages, Push Kit's send API over HTTP/1.1 and TLS (one token a message)`, 'hms'],
  ['send: fake OneSignal', `${SEND} messages, create notification over HTTP/1.1 and TLS (one subscription a message)`, 'onesignal'],
];
const FAR_ROWS: [string, string, 'farFcm' | 'farApns'][] = [
  [`send: FCM ${FAR_DELAY_MS} ms away`, `one worker, ${FAR_SENDS} one-device messages, answers ${FAR_DELAY_MS} ms after each send, 100 streams per connection`, 'farFcm'],
  [`send: APNs ${FAR_DELAY_MS} ms away`, `one worker, ${FAR_SENDS} one-device messages, answers ${FAR_DELAY_MS} ms after each send`, 'farApns'],
];

/** The send stage alone, per provider: the jobs are queued, then one worker drains them. */
async function sendStages(gatewayPort: number, providers: Providers) {
  const figures: Record<string, { text: string; rate: number }> = {};
  const drain = async (name: string, extra: Record<string, string>) => {
    const toSend = await count(DELIVERIES_TO_SEND_SQL);
    const started = performance.now();
    const worker = start(name, extra);
    await until(async () => (await sending()).done, `${name} to send`);
    const seconds = (performance.now() - started) / 1000;
    await stop(worker);
    return { toSend, rate: toSend / seconds };
  };
  const sandbox = await drain('push-worker-fcm', {});
  figures.sandbox = { text: `${sandbox.rate.toFixed(0)} deliveries/s (${sandbox.toSend})`, rate: sandbox.rate };
  const stages: [string, 'fcm' | 'apns' | 'hms' | 'onesignal', (i: number) => string][] = [
    ['push-worker-fcm', 'fcm', fcmPlayer],
    ['push-worker-apns', 'apns', apnsPlayer],
    ['push-worker-hms', 'hms', hmsPlayer],
    ['push-worker-onesignal', 'onesignal', oneSignalPlayer],
  ];
  for (const [app, key, player] of stages) {
    await each(gatewayPort, 4, batchesOf(SEND, player));
    const sent = await drain(app, providers.workerEnv());
    figures[key] = { text: `${sent.rate.toFixed(0)} deliveries/s (${sent.toSend})`, rate: sent.rate };
    // The fake keeps every request it took, which the bench never reads: forgotten, so the second
    // pass does not run on a heap grown by the first.
    providers[key].requests.length = 0;
  }
  return figures;
}

/** Singles and batches through the gateway, with the CPU each process took per request or message. */
async function accept(gatewayPort: number, gatewayPid: number | undefined, bare: number) {
  const figures: Record<string, { text: string; rate: number }> = {};
  const apps = { gateway: gatewayPid };
  let cpu = sampleCpu(apps);
  const singles = await loadSingles(gatewayPort);
  const other = Object.entries(singles.statuses).filter(([status]) => status !== '200');
  if (other.length) log(`singles answered other than 200: ${JSON.stringify(singles.statuses)}`);
  figures.singles = {
    text:
      `${singles.perSecond.toFixed(0)} req/s (${timesBaseline(singles.perSecond, bare)}), p50 ${singles.p50.toFixed(1)} ms, p99 ${singles.p99.toFixed(1)} ms; ` +
      `CPU per request: ${cpuPer(cpuBetween(cpu, sampleCpu(apps)), singles.requests, 'load generator')}`,
    rate: singles.perSecond,
  };

  const batches = batchesOf(BATCHES * BATCH_SIZE, fcmPlayer);
  cpu = sampleCpu(apps);
  const batch = await each(gatewayPort, 4, batches);
  figures.batches = {
    text:
      `${((BATCHES * BATCH_SIZE) / batch.seconds).toFixed(0)} messages/s (${timesBaseline((BATCHES * BATCH_SIZE) / batch.seconds, bare)}), p50 ${batch.p50.toFixed(0)} ms; ` +
      `CPU per message: ${cpuPer(cpuBetween(cpu, sampleCpu(apps)), BATCHES * BATCH_SIZE, 'load generator')}`,
    rate: (BATCHES * BATCH_SIZE) / batch.seconds,
  };
  figures.floor = await rawInsertFloor(bare);
  return figures;
}

/**
 * The least any durable accept costs PostgreSQL: the batches' messages inserted as they came, one
 * row of JSON each, with a primary key and nothing else (no dedupe, no devices, no jobs).
 */
async function rawInsertFloor(bare: number) {
  const client = await pool.connect();
  try {
    await client.query('DROP TABLE IF EXISTS bench_floor');
    await client.query('CREATE TABLE bench_floor (id uuid PRIMARY KEY, body json NOT NULL)');
    const bodies = batchesOf(BATCHES * BATCH_SIZE, fcmPlayer).map((request) => request.body);
    const cpu = sampleCpu({});
    const started = performance.now();
    for (const body of bodies) {
      await client.query(`INSERT INTO bench_floor (id, body) SELECT uuid_v7(), m FROM json_array_elements($1::json) AS m`, [body]);
    }
    const seconds = (performance.now() - started) / 1000;
    const rows = BATCHES * BATCH_SIZE;
    const used = cpuBetween(cpu, sampleCpu({}));
    await client.query('DROP TABLE bench_floor');
    return {
      text: `${(rows / seconds).toFixed(0)} rows/s (${timesBaseline(rows / seconds, bare)}); CPU per row: PostgreSQL ${Math.round((used.postgres * 1000) / rows)} µs, bench ${Math.round((used.bench * 1000) / rows)} µs`,
      rate: rows / seconds,
    };
  } finally {
    client.release();
  }
}

async function pass(gatewayPort: number, gatewayPid: number | undefined, receiver: Receiver, providers: Providers, bare: number) {
  const figures = await accept(gatewayPort, gatewayPid, bare);

  Object.assign(figures, await sendStages(gatewayPort, providers));

  Object.assign(figures, await farSend(farDeps(gatewayPort)));

  // The dispatcher alone: every status of the stages above waits in the outbox.
  const toPost = await count(PENDING_EVENTS);
  const postsBefore = receiver.events;
  const dispatchStarted = performance.now();
  const dispatcher = start('webhook-dispatcher', { CRM_STATUS_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/push-status` });
  const dispatching = sampleCpu({ dispatcher: dispatcher.pid });
  await until(async () => (await count(ANY_PENDING_EVENT)) === 0, 'the dispatcher to post');
  const dispatchRate = toPost / ((performance.now() - dispatchStarted) / 1000);
  const dispatchCpu = cpuPer(cpuBetween(dispatching, sampleCpu({ dispatcher: dispatcher.pid })), toPost, 'receiver');
  figures.dispatcher = { text: `${dispatchRate.toFixed(0)} events/s (${toPost}; ${receiver.events - postsBefore} posts; CPU per event: ${dispatchCpu})`, rate: dispatchRate };

  // End to end: from the first request until every status reached the receiver.
  const worker = start('push-worker-fcm', {});
  await sleep(1000);
  const cost = await beginCost(DATABASE_URL, 'end to end');
  const e2e = await endToEnd(gatewayPort, receiver, { gateway: gatewayPid, 'FCM worker': worker.pid, dispatcher: dispatcher.pid });
  await Promise.all([stop(worker), stop(dispatcher)]);
  figures.e2e = { ...e2e, text: `${timesBaseline(e2e.rate, bare)}: ${e2e.text}` };
  Object.assign(figures, (await cost.end(e2e.messages)).figures);

  // The same with the opt-in batched status webhook, for a receiver that takes arrays of events.
  const batchedDispatcher = start('webhook-dispatcher', {
    CRM_STATUS_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/push-status`,
    CRM_STATUS_WEBHOOK_BATCH_MAX: String(E2E_WEBHOOK_BATCH),
  });
  const batchedWorker = start('push-worker-fcm', {});
  await sleep(1000);
  const batched = await endToEnd(gatewayPort, receiver, { gateway: gatewayPid, 'FCM worker': batchedWorker.pid, dispatcher: batchedDispatcher.pid });
  figures.e2eBatched = { ...batched, text: `${timesBaseline(batched.rate, bare)}: ${batched.text}` };
  await Promise.all([stop(batchedWorker), stop(batchedDispatcher)]);
  return figures;
}

/** From the first request until the receiver had every status, with the CPU each process took per message. */
async function endToEnd(gatewayPort: number, receiver: Receiver, apps: Record<string, number | undefined>): Promise<{ text: string; rate: number; messages: number }> {
  receiver.sent.clear();
  const ids: string[] = [];
  const cpu = sampleCpu(apps);
  const started = performance.now();
  if (E2E_SINGLES) {
    const singles = Array.from({ length: END_TO_END }, () => single(OPERATOR));
    await each(gatewayPort, CONNECTIONS, singles, (_status, body) => void ids.push((JSON.parse(body) as { push_id: string }).push_id));
  } else {
    await each(gatewayPort, 4, batchesOf(END_TO_END, fcmPlayer), (_status, body) => {
      for (const entry of (JSON.parse(body) as { successful: { push_id: string }[] }).successful) ids.push(entry.push_id);
    });
  }
  const accepted = (performance.now() - started) / 1000;
  await until(async () => ids.every((id) => receiver.sent.has(id)), 'every status of the end-to-end run');
  const seconds = (performance.now() - started) / 1000;
  const used = cpuPer(cpuBetween(cpu, sampleCpu(apps)), ids.length, 'load generator and receiver');
  return {
    text: `${(ids.length / seconds).toFixed(0)} messages/s (accepted in ${accepted.toFixed(1)} s, reported in ${seconds.toFixed(1)} s; CPU per message: ${used})`,
    rate: ids.length / seconds,
    messages: ids.length,
  };
}

async function main() {
  const receiver = await new Receiver().start();
  const providers = await Providers.start(dir);
  const gatewayPort = await freePort();
  const gateway = start('gateway', { PORT: String(gatewayPort), HOST: '127.0.0.1', MAX_EVENT_LOOP_DELAY_MS: '0' }, profiled('gateway'));
  try {
    await until(async () => (await fetch(`http://127.0.0.1:${gatewayPort}/health/ready`).catch(() => undefined))?.ok === true, 'the gateway', 30000);
    if (CAMPAIGN_ARG >= 0) {
      if (!(CAMPAIGN > 0)) throw new Error('--campaign takes a number of messages');
      const deps = { gatewayPort, gatewayPid: gateway.pid, players: PLAYERS, pool, redisUrl: REDIS_URL, providers, start: (name: string, extra: Record<string, string>) => start(name, extra), log };
      for (const line of await campaign(CAMPAIGN, deps)) console.log(line);
      return;
    }
    // BENCH_ONLY=compliance: the gate's stage alone, on players of its own.
    if (env.BENCH_ONLY === 'compliance') {
      const gate = await complianceStage(gateDeps(gatewayPort, providers));
      console.log('');
      console.log('| stage | load | fresh tables |');
      console.log('|---|---|---|');
      for (const [stage, what, key] of GATE_ROWS) console.log(`| ${stage} | ${what} | ${gate[key].text} |`);
      return;
    }

    const devices: Request[] = [];
    for (let i = 0; i < PLAYERS; i++) {
      devices.push({ path: '/v1/devices', headers: INTERNAL, body: JSON.stringify({ user_id: fcmPlayer(i), brand_id: BRAND, provider: 'fcm', platform: 'android', token: fcmToken() }) });
      devices.push({ path: '/v1/devices', headers: INTERNAL, body: JSON.stringify({ user_id: apnsPlayer(i), brand_id: BRAND, provider: 'apns', platform: 'ios', token: apnsToken() }) });
      devices.push({ path: '/v1/devices', headers: INTERNAL, body: JSON.stringify({ user_id: hmsPlayer(i), brand_id: BRAND, provider: 'hms', platform: 'android', token: hmsToken() }) });
      devices.push({ path: '/v1/devices', headers: INTERNAL, body: JSON.stringify({ user_id: oneSignalPlayer(i), brand_id: BRAND, provider: 'onesignal', platform: 'ios', token: oneSignalSubscriptionId() }) });
    }
    await each(gatewayPort, 16, devices);
    log(`${PLAYERS} FCM, APNs, HMS and OneSignal players registered`);

    // BENCH_ONLY=send: the send stages alone (sandbox and each provider's local server).
    if (env.BENCH_ONLY === 'send') {
      // The sandbox drains what is queued (in a whole pass, the batches stage's messages).
      await each(gatewayPort, 4, batchesOf(SEND, fcmPlayer));
      const sent = await sendStages(gatewayPort, providers);
      console.log('');
      console.log('| stage | load | fresh tables |');
      console.log('|---|---|---|');
      for (const [stage, what, key] of SEND_ROWS) console.log(`| ${stage} | ${what} | ${sent[key].text} |`);
      return;
    }

    if (env.BENCH_ONLY === 'far-send') {
      const far = await farSend(farDeps(gatewayPort));
      console.log('');
      console.log('| stage | load | fresh tables |');
      console.log('|---|---|---|');
      for (const [stage, what, key] of FAR_ROWS) console.log(`| ${stage} | ${what} | ${far[key].text} |`);
      return;
    }

    if (env.BENCH_ONLY === 'end-to-end') {
      const dispatcher = start('webhook-dispatcher', { CRM_STATUS_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/push-status` }, profiled('dispatcher'));
      const worker = start('push-worker-fcm', {}, profiled('push-worker-fcm'));
      await sleep(1000);
      const cost = await beginCost(DATABASE_URL, 'end to end');
      const e2e = await endToEnd(gatewayPort, receiver, { gateway: gateway.pid, 'FCM worker': worker.pid, dispatcher: dispatcher.pid });
      await Promise.all([stop(worker), stop(dispatcher)]);
      const { figures } = await cost.end(e2e.messages);
      console.log('');
      console.log('| stage | load | fresh tables |');
      console.log('|---|---|---|');
      console.log(`| end to end${E2E_SINGLES ? ', singles' : ''} | ${END_TO_END} messages: first request to last status received | ${e2e.text} |`);
      for (const [stage, what, key] of costRows(END_TO_END).filter(([, , key]) => key in figures)) console.log(`| ${stage} | ${what} | ${figures[key].text} |`);
      return;
    }

    // BENCH_ONLY=singles: the singles stage alone, no baseline (for the gateway's CPU profile).
    if (env.BENCH_ONLY === 'singles') {
      const singles = await loadSingles(gatewayPort);
      console.log(`singles: ${singles.perSecond.toFixed(0)} req/s, p50 ${singles.p50.toFixed(1)} ms, p99 ${singles.p99.toFixed(1)} ms`);
      return;
    }
    // BENCH_ONLY=batches: the batches stage alone, no baseline (for the gateway's and PostgreSQL's profiles).
    if (env.BENCH_ONLY === 'batches') {
      const batch = await each(gatewayPort, 4, batchesOf(BATCHES * BATCH_SIZE, fcmPlayer));
      console.log(`batches: ${((BATCHES * BATCH_SIZE) / batch.seconds).toFixed(0)} messages/s, p50 ${batch.p50.toFixed(0)} ms`);
      return;
    }
    const { rate: bare, text: bareText } = await baseline();
    log(`bare Fastify baseline: ${bareText}`);

    if (env.BENCH_ONLY === 'accept') {
      const accepted = await accept(gatewayPort, gateway.pid, bare);
      console.log('');
      console.log('| stage | load | fresh tables |');
      console.log('|---|---|---|');
      console.log(`| bare Fastify baseline | single-push body, ${CONNECTIONS} connections, ${SECONDS} s | ${bareText} |`);
      for (const [stage, what, key] of ACCEPT_ROWS) console.log(`| ${stage} | ${what} | ${accepted[key].text} |`);
      return;
    }
    const fresh = await pass(gatewayPort, gateway.pid, receiver, providers, bare);
    log('fresh tables done');
    // Retention drops the day partitions holding every row of the stages above (and makes them again
    // for the second pass), then the dispatcher alone, on databases of its own.
    Object.assign(fresh, await retentionCost(DATABASE_URL, { writes: fresh.pgWrites.rate, wal: fresh.pgWal.rate }));
    Object.assign(fresh, await dispatcherFigures(DATABASE_URL));
    // The gate's stage, on fresh tables only: what it measures is the worker's wait on the operator's endpoint.
    Object.assign(fresh, await complianceStage(gateDeps(gatewayPort, providers)));

    let old: Awaited<ReturnType<typeof pass>> | undefined;
    // The bare app again before the second pass: how fast the machine itself is then, since a
    // shared machine's speed moves between passes (the old rows cannot slow the bare app).
    let bareAgain: Awaited<ReturnType<typeof baseline>> | undefined;
    if (OLD_ROWS > 0) {
      const { seedOldRows } = await import(pathToFileURL(resolve('tools/seed-old-rows.mjs')).href);
      const seeded = performance.now();
      // Rows of the last month, inside the retention window: the tables as they stand in steady
      // state, which retention keeps from growing further (it purges nothing during the run).
      await seedOldRows(DATABASE_URL, { rows: OLD_ROWS, ageDays: 1 });
      // The seeding's dirty pages are written now, not by a checkpoint in the middle of the second pass.
      await pool.query('CHECKPOINT').catch((error: Error) => log(`no CHECKPOINT (${error.message}): the second pass may pay for the seeding's writes`));
      log(`${OLD_ROWS} old rows added in ${((performance.now() - seeded) / 1000).toFixed(0)} s`);
      bareAgain = await baseline();
      log(`bare Fastify baseline, before the second pass: ${bareAgain.text}`);
      old = await pass(gatewayPort, gateway.pid, receiver, providers, bareAgain.rate);
    }

    const rows: [string, string, keyof typeof fresh | null][] = [
      ['bare Fastify baseline', `single-push body, ${CONNECTIONS} connections, ${SECONDS} s`, null],
      ...ACCEPT_ROWS,
      ...SEND_ROWS,
      ...FAR_ROWS,
      ...GATE_ROWS,
      ['dispatcher', 'queued status events to a local receiver', 'dispatcher'],
      ['end to end', `${END_TO_END} messages: first request to last status received`, 'e2e'],
      ['end to end, batched status webhook', `the same, CRM_STATUS_WEBHOOK_BATCH_MAX=${E2E_WEBHOOK_BATCH}`, 'e2eBatched'],
      ...costRows(END_TO_END).filter(([, , key]) => key in fresh),
    ];
    const header = ['stage', 'load', 'fresh tables', old ? `with ${OLD_ROWS.toLocaleString('en')} old rows` : '', old ? 'change' : ''];
    const table = rows.map(([stage, what, key]) => {
      if (!key) return [stage, what, bareText, bareAgain?.text ?? '', bareAgain ? `${(((bareAgain.rate - bare) / bare) * 100).toFixed(0)}%` : ''];
      const a = fresh[key];
      const b = old?.[key];
      return [stage, what, a.text, b?.text ?? '', b ? `${(((b.rate - a.rate) / a.rate) * 100).toFixed(0)}%` : ''];
    });
    console.log('');
    console.log(`| ${header.join(' | ')} |`);
    console.log(`|${header.map(() => '---').join('|')}|`);
    for (const line of table) console.log(`| ${line.join(' | ')} |`);
  } finally {
    await stop(gateway);
    receiver.close();
    await providers.close();
    await pool.end();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
