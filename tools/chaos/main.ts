// `npm run chaos`: the project's fault suite. The built apps run as separate processes (as in
// production) on a database and a redis-server of the suite's own; a CRM driver sends pushes and
// credits as the CRM would, while every app is killed with kill -9, PostgreSQL is cut through a TCP
// proxy, Redis is killed and loses the last second of its append-only file, and the CRM's webhooks
// fail. Local FCM, APNs and Web Push servers count what each device received. Then the verdicts:
// nothing lost, duplicates only from a killed worker's sends in flight, credits and bonus events
// exactly once, no 5xx but 503.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeCrm, freePort, seededRandom, TcpProxy } from '@operator/testing';
import { App, type Exit } from './apps';
import { checkAnswers, checkCredits, checkDuplicates, checkNothingLost, checkStatuses, type Check, type CreditRows, type RunRecord } from './checks';
import { BRAND_ID, CrmDriver, INTERNAL_KEY, Pool, type ChaosCredit, type ChaosMessage } from './crm';
import { planFaults, runFaults, type Fault } from './faults';
import { PROVIDERS, type ProviderName } from '@operator/contract';
import { Providers, type ChaosDevice } from './providers';
import { parseOptions } from './scale';
import { ChaosRedis, freshDatabase, query } from './stores';
import { since, sleep } from './util';

// As tools/apps.mjs lists them.
const APPS = ['gateway', 'push-worker-fcm', 'push-worker-apns', 'push-worker-webpush', 'bonus', 'webhook-dispatcher'];
const WORKER_CONCURRENCY = 10;
const WORKER_PARALLEL_MESSAGES = 16;
const DEVICE_LAYOUTS: ProviderName[][] = [['fcm'], ['fcm'], ['fcm'], ['fcm'], ['apns'], ['apns'], ['webpush'], ['fcm', 'webpush'], ['fcm', 'webpush'], ['apns', 'webpush']];

const options = parseOptions(process.argv.slice(2), process.env);
const { scale } = options;
const rng = seededRandom(options.seed);
const databaseUrl = process.env.CHAOS_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_chaos';
const dir = mkdtempSync(join(tmpdir(), 'operator-chaos-'));
const apps = new Map<string, App>();
const faults: Fault[] = [];
let redis: ChaosRedis | undefined;
let stopping = false;

function cleanUp(): void {
  stopping = true;
  for (const app of apps.values()) app.killNow();
  redis?.stop();
  if (!options.keep) rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    console.error(`chaos: ${signal}, stopping`);
    process.exit(130);
  });
}
const hardTimeout = setTimeout(() => {
  console.error(`chaos: hard timeout after ${scale.hardTimeoutMs / 1000} s`);
  console.log('\nchaos: 0 passed, 1 failed');
  process.exit(1);
}, scale.hardTimeoutMs);
hardTimeout.unref();

const log = (text: string) => console.log(`chaos: ${text}`);

async function until(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return true;
    await sleep(200);
  }
  return false;
}

async function main(): Promise<number> {
  const started = Date.now();
  log(`${scale.name} run, seed ${options.seed}: ${scale.messages} messages, ${scale.credits} credits, ${scale.sendMs / 1000} s of sending; files in ${dir}`);

  freshDatabase(databaseUrl);
  redis = new ChaosRedis(await freePort(), join(dir, 'redis'));
  await redis.start();
  const pgProxy = await TcpProxy.forUrl(databaseUrl).start();
  const providers = await Providers.start(dir);
  const crm = await FakeCrm.start();
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    DATABASE_URL: pgProxy.urlFor(databaseUrl),
    DATABASE_POOL_SIZE: '5',
    REDIS_URL: redis.url,
    QUEUE_PREFIX: 'chaos',
    // Apps started again, and several workers of one kind, each take a free metrics port.
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    PORT: String(port),
    CRM_STATUS_WEBHOOK_URL: crm.url('/push-status'),
    CRM_EVENTS_BASE_URL: crm.origin,
    WEBHOOK_POLL_MS: '100',
    WEBHOOK_BACKOFF_MS: '500',
    WEBHOOK_MAX_BACKOFF_MS: '5000',
    BONUS_POLL_MS: '100',
    BONUS_BACKOFF_MS: '1000',
    PUSH_WORKER_CONCURRENCY: String(WORKER_CONCURRENCY),
    PUSH_WORKER_PARALLEL_MESSAGES: String(WORKER_PARALLEL_MESSAGES),
    PUSH_CLAIM_LEASE_MS: '15000',
    PUSH_SEND_BACKOFF_MS: '500',
    // Jobs Redis lost are found again within the run (production waits 5 minutes by default).
    PUSH_RECONCILE_INTERVAL_MS: '2000',
    PUSH_RECONCILE_AFTER_MS: '20000',
    WEBHOOK_CONCURRENCY: '32',
    ...providers.workerEnv(),
  };
  mkdirSync(join(dir, 'logs'));
  const onCrash = (exit: Exit) => {
    faults.push({ kind: 'crash', target: exit.app, at: exit.at, detail: exit.how });
    log(`${exit.app} ended on its own (${exit.how}); starting it again`);
    if (!stopping) setTimeout(() => !stopping && apps.get(exit.app)?.start(), 1000);
  };
  for (const name of APPS) apps.set(name, new App(name, env, join(dir, 'logs'), onCrash));
  for (const app of apps.values()) app.start();
  if (!(await until(async () => (await fetch(`${base}/health/ready`)).ok, 30000))) throw new Error('the gateway did not become ready');

  // Players and their devices, registered by the operator's back end.
  const devices = new Map<string, ChaosDevice[]>();
  const players: string[] = [];
  for (let i = 0; i < scale.players; i += 1) {
    const userId = `p-${i}`;
    players.push(userId);
    devices.set(userId, rng.pick(DEVICE_LAYOUTS).map((provider, n) => providers.newDevice(provider, userId, BRAND_ID, `${userId}-${n}`)));
  }
  let t0 = Date.now();
  const driver = new CrmDriver(base, rng, () => t0 + scale.sendMs + scale.settleMs);
  const registering = new Pool(16);
  let registrationFailures = 0;
  for (const device of [...devices.values()].flat()) {
    await registering.add(async () => {
      const answer = await driver.call('/v1/devices', device.registration, {}, INTERNAL_KEY);
      if (answer.status !== 201 && answer.status !== 200) registrationFailures += 1;
    });
  }
  await registering.drain();
  driver.statuses.clear();
  if (registrationFailures) throw new Error(`${registrationFailures} devices could not be registered`);
  log(`${players.length} players with ${[...devices.values()].flat().length} devices registered (${((Date.now() - started) / 1000).toFixed(1)} s of setup)`);

  // What the CRM will send.
  const messages: ChaosMessage[] = [];
  for (let i = 0; i < scale.messages; i += 1) {
    const activityId = 100000 + i;
    const roll = rng.next();
    const expect = roll < 0.02 ? 'no-device' : roll < 0.03 ? 'invalid' : 'accept';
    const userId = expect === 'no-device' ? `ghost-${i}` : rng.pick(players);
    const meta = { campaign: 'chaos', message: i, variant: rng.int(1, 4) };
    const body: Record<string, unknown> = {
      activity: { id: activityId, brand_id: BRAND_ID, user_id: userId, activity_id: 55, action_group_id: 2, trigger_hash: `th-${i}`, action_id: 3 },
      title: 'Weekend reload',
      body: `Your free spins are waiting (${i})`,
      meta,
    };
    if (expect === 'invalid') delete body.title;
    messages.push({ activityId, userId, expect, body, meta });
  }
  // About one message in seven goes alone (single); the rest in batches of 20 to 200.
  const units: ChaosMessage[][] = [];
  let batch: ChaosMessage[] = [];
  let batchSize = rng.int(20, 200);
  for (const message of messages) {
    if (rng.chance(0.15)) units.push([message]);
    else batch.push(message);
    if (batch.length >= batchSize) {
      units.push(batch);
      batch = [];
      batchSize = rng.int(20, 200);
    }
  }
  if (batch.length) units.push(batch);
  const bonusAmounts = new Map((await query<{ code: string; amount: string }>(databaseUrl, 'SELECT code, amount_minor::text AS amount FROM bonuses WHERE active')).map((b) => [b.code, Number(b.amount)]));
  const bonusCodes = [...bonusAmounts.keys()];
  const creditPlayers = Math.max(1, Math.ceil(scale.credits / 5));
  const credits: ChaosCredit[] = [];
  for (let i = 0; i < scale.credits; i += 1) {
    const userId = `cp-${rng.int(0, creditPlayers - 1)}`;
    const serviceId = `chaos-credit-${i}`;
    if (rng.chance(0.5)) {
      const code = rng.pick(bonusCodes);
      credits.push({ serviceId, kind: 'bonus', userId, amountMinor: bonusAmounts.get(code)!, body: { user_id: userId, bonus_code: code, validity_amount: 7 } });
    } else {
      const amountMinor = rng.int(100, 5000);
      credits.push({ serviceId, kind: 'funds', userId, amountMinor, body: { user_id: userId, amount: amountMinor / 100, currency: 'EUR', type: 'cashback' } });
    }
  }

  // The run: sending and faults side by side.
  const plan = planFaults(scale, APPS, rng);
  t0 = Date.now();
  const faulting = runFaults(plan, t0, { apps, pgProxy, redis, crm, aofLossMs: scale.aofLossMs }, faults, () => stopping);
  const resends: Promise<void>[] = [];
  const resendLater = (message: ChaosMessage) => {
    if (!message.pushId || !rng.chance(0.05)) return;
    const delay = rng.int(500, 8000);
    const asBatch = rng.chance(0.5);
    resends.push(sleep(delay).then(() => driver.resend(message, asBatch)));
  };
  const sendMessages = (async () => {
    const pool = new Pool(48);
    let sent = 0;
    for (const unit of units) {
      const wait = t0 + (sent / messages.length) * scale.sendMs - Date.now();
      if (wait > 0) await sleep(wait);
      sent += unit.length;
      await pool.add(async () => {
        if (unit.length === 1) await driver.single(unit[0]);
        else await driver.batch(unit);
        unit.forEach(resendLater);
      });
    }
    await pool.drain();
  })();
  const sendCredits = (async () => {
    const pool = new Pool(8);
    for (let i = 0; i < credits.length; i += 1) {
      const wait = t0 + (i / credits.length) * scale.sendMs - Date.now();
      if (wait > 0) await sleep(wait);
      const credit = credits[i];
      await pool.add(async () => {
        await driver.credit(credit);
        if (credit.creditId && rng.chance(0.1)) {
          await sleep(rng.int(200, 5000));
          await driver.credit(credit, true);
        }
      });
    }
    await pool.drain();
  })();
  const progress = setInterval(() => {
    const acked = messages.filter((m) => m.pushId).length;
    log(`${since(t0, Date.now())} ${acked} messages and ${credits.filter((c) => c.creditId).length} credits acknowledged, ${faults.length} faults so far`);
  }, 15000);
  await Promise.all([sendMessages, sendCredits, faulting]);
  await Promise.all(resends);
  const sendingDone = Date.now();
  log(`${since(t0, sendingDone)} sending and faults over; settling`);

  // Settle: every acknowledged message final, every event dispatched, every credit carried out.
  // Stop early when what is left does not move: each count is zero or has not changed for stallMs.
  let last = '';
  const changed = new Map<string, { value: string; at: number }>();
  let settled = false;
  while (Date.now() - sendingDone < scale.settleMs) {
    const [row] = await query<{ messages: string; deliveries: string; events: string; credits: string }>(
      databaseUrl,
      `SELECT (SELECT count(*) FROM messages WHERE status = 'accepted') AS messages,
              (SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')) AS deliveries,
              (SELECT count(*) FROM events WHERE dispatch_state = 'pending') AS events,
              (SELECT count(*) FROM credits WHERE status = 'accepted') AS credits`,
    ).catch(() => [{ messages: '?', deliveries: '?', events: '?', credits: '?' }]);
    last = `${row.messages} messages and ${row.deliveries} deliveries not final, ${row.events} events not dispatched, ${row.credits} credits not carried out`;
    const counts = Object.entries(row);
    if (counts.every(([, value]) => value === '0')) {
      settled = true;
      break;
    }
    for (const [name, value] of counts) if (changed.get(name)?.value !== value) changed.set(name, { value, at: Date.now() });
    if (counts.every(([name, value]) => value === '0' || Date.now() - changed.get(name)!.at > scale.stallMs)) {
      log(`nothing left moved for ${scale.stallMs / 1000} s: ${last}`);
      break;
    }
    await sleep(1000);
  }
  clearInterval(progress);
  const settleMs = Date.now() - sendingDone;
  log(settled ? `settled after ${(settleMs / 1000).toFixed(1)} s` : `not settled after ${(settleMs / 1000).toFixed(1)} s: ${last}`);
  await sleep(1000);
  driver.stop();

  // Every app stops on SIGTERM, after all that.
  stopping = true;
  const stops = await Promise.all([...apps.values()].map(async (app) => [app.name, await app.stop(30000)] as const));

  const rows: CreditRows = {
    credits: await query(databaseUrl, `SELECT id, idempotency_key AS "idempotencyKey", kind, user_id AS "userId", amount_minor::text AS "amountMinor", status, error FROM credits`),
    ledger: await query(
      databaseUrl,
      `SELECT e.transaction_id AS "transactionId", count(*)::text AS legs, sum(e.amount_minor)::text AS total,
              (sum(e.amount_minor) FILTER (WHERE a.owner <> 'house'))::text AS "playerLeg"
         FROM ledger_entries e JOIN accounts a ON a.id = e.account_id GROUP BY e.transaction_id`,
    ),
    accounts: await query(
      databaseUrl,
      `SELECT a.owner, a.kind, a.balance_minor::text AS "balanceMinor", coalesce(sum(e.amount_minor), 0)::text AS "entriesMinor"
         FROM accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id GROUP BY a.id`,
    ),
    playerBonuses: await query(databaseUrl, `SELECT id, credit_id AS "creditId" FROM player_bonuses`),
  };
  const run: RunRecord = {
    t0,
    messages,
    credits,
    devices,
    receipts: providers.receipts(),
    webhook: crm.accepted,
    faults,
    driver,
    inFlightBound: WORKER_CONCURRENCY * WORKER_PARALLEL_MESSAGES,
    inFlightWindowMs: scale.inFlightWindowMs,
  };
  const crashes = [...apps.values()].flatMap((app) => app.crashes);
  const checks: Check[] = [
    checkNothingLost(run),
    checkDuplicates(run),
    checkCredits(run, rows),
    checkStatuses(run),
    checkAnswers(run),
    {
      name: 'no app ended on its own (only the kills the suite made)',
      ok: crashes.length === 0,
      lines: crashes.length
        ? crashes.flatMap((c) => [
            `${c.app} ${c.how} at ${since(t0, c.at)}, during: ${faults.filter((f) => f.kind !== 'crash' && f.at <= c.at && (f.endAt ?? f.at) >= c.at - 3000).map((f) => `${f.kind}${f.target ? ` ${f.target}` : ''} ${since(t0, f.at)}`).join(', ') || 'no fault'}`,
            ...c.tail.split('\n').filter((line) => /error|exception|reject/i.test(line) && !/^\s+at /.test(line)).slice(0, 3).map((line) => `    ${line.trim().slice(0, 300)}`),
          ])
        : ['none'],
    },
    {
      name: `settled within ${scale.settleMs / 1000} s of the last fault`,
      ok: settled,
      lines: [settled ? `settled in ${(settleMs / 1000).toFixed(1)} s` : `after ${(settleMs / 1000).toFixed(1)} s: ${last}`],
    },
    {
      name: 'every app stops on SIGTERM afterwards',
      ok: stops.every(([, how]) => how === 'exit 0'),
      lines: [stops.map(([name, how]) => `${name} ${how}`).join(', ')],
    },
  ];

  await Promise.all([providers.close(), crm.close(), pgProxy.stop()]);

  // The report.
  const kills = faults.filter((f) => f.kind === 'kill');
  console.log(`\n=== chaos report (${scale.name}, seed ${options.seed}) ===`);
  console.log(`messages: ${messages.length} sent by the CRM (${units.filter((u) => u.length === 1).length} singles, ${units.filter((u) => u.length > 1).length} batches), ${messages.filter((m) => m.pushId).length} acknowledged, ${driver.resends.messages} re-sent after acknowledgement`);
  console.log(`credits: ${credits.length} sent, ${credits.filter((c) => c.creditId).length} acknowledged, ${driver.resends.credits} re-sent after 200`);
  console.log(`kills (kill -9): ${APPS.map((name) => `${name} ${kills.filter((k) => k.target === name).length}`).join(', ')}`);
  console.log(`PostgreSQL cuts: ${faults.filter((f) => f.kind === 'pg-cut').length} × ${scale.pgCutMs / 1000} s; Redis crashes: ${faults.filter((f) => f.kind === 'redis-crash').length}; webhook 503 ${scale.webhook503Ms / 1000} s then refused ${scale.webhookDownMs / 1000} s`);
  console.log(`provider servers accepted: ${PROVIDERS.map((p) => `${p} ${run.receipts.filter((r) => r.provider === p).length}`).join(', ')}; refused: ${JSON.stringify(providers.refusals())}`);
  console.log('faults:');
  for (const fault of [...faults].sort((a, b) => a.at - b.at)) {
    // A worker killed mid-work: what its provider accepted in the second before.
    const busy = fault.target?.startsWith('push-worker-')
      ? ` (mid-work: ${run.receipts.filter((r) => `push-worker-${r.provider}` === fault.target && r.at <= fault.at && r.at > fault.at - 1000).length} sends in the second before)`
      : '';
    console.log(`  ${since(t0, fault.at).padStart(7)} ${fault.kind}${fault.target ? ` ${fault.target}` : ''}${fault.endAt ? ` (over ${since(t0, fault.endAt)})` : ''}${fault.detail ? ` ${fault.detail}` : ''}${busy}`);
  }
  console.log(`timing: setup + sending + settling = ${((Date.now() - started) / 1000).toFixed(0)} s (settling ${(settleMs / 1000).toFixed(0)} s)`);
  console.log('checks:');
  checks.forEach((check, i) => {
    console.log(`${check.ok ? 'ok  ' : 'FAIL'} ${i + 1}. ${check.name}`);
    for (const line of check.lines) console.log(`       ${line}`);
  });
  const failed = checks.filter((c) => !c.ok).length;
  console.log(`\nchaos: ${checks.length - failed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main()
  .then((code) => process.exit(code))
  .catch((error) => {
    console.error('chaos: the run could not complete:', error);
    console.log('\nchaos: 0 passed, 1 failed');
    process.exit(1);
  });
