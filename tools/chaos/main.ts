// `npm run chaos`: the fault suite. The built apps run as processes on stores of the suite's own
// while a CRM driver sends and faults strike (kill -9, PostgreSQL cut, Redis losing its AOF tail,
// webhooks failing). Verdicts: nothing lost, duplicates only from a killed worker's sends in
// flight, credits and bonus events exactly once, no 5xx but 503.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeCrm, freePort, seededRandom, TcpProxy } from '@operator/testing';
import { App, type Exit } from './apps';
import { checkAnswers, checkCredits, checkDuplicates, checkNothingLost, checkStatuses, type Check, type RunRecord } from './checks';
import { CrmDriver } from './crm';
import { planFaults, runFaults, type Fault } from './faults';
import type { ProviderName } from '@operator/contract';
import { PROVIDER_NAMES as PROVIDERS } from '@operator/provider-registry';
import { Providers } from './providers';
import { parseOptions } from './scale';
import { ChaosRedis, freshDatabase } from './stores';
import { APPS, RECORD_WINDOW_MS, WORKER_CONCURRENCY, WORKER_PARALLEL_MESSAGES, appEnv, sendsOnTheWire, creditRows, planWorkload, printChecks, registerDevices, send, settle, until } from './workload';
import { since, sleep } from './util';


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
    ...appEnv(providers, crm, 'chaos'),
    DATABASE_URL: pgProxy.urlFor(databaseUrl),
    REDIS_URL: redis.url,
    PORT: String(port),
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

  let t0 = Date.now();
  const driver = new CrmDriver(base, rng, () => t0 + scale.sendMs + scale.settleMs);
  const devices = await registerDevices(driver, providers, scale, rng);
  log(`${devices.size} players with ${[...devices.values()].flat().length} devices registered (${((Date.now() - started) / 1000).toFixed(1)} s of setup)`);
  const work = await planWorkload(databaseUrl, devices, scale, rng);
  const { messages, units, credits } = work;

  const plan = planFaults(scale, APPS, rng);
  t0 = Date.now();
  const faulting = runFaults(plan, t0, { apps, pgProxy, redis, crm, aofLossMs: scale.aofLossMs }, faults, () => stopping);
  await Promise.all([send(driver, work, scale, rng, t0, log, () => faults.length), faulting]);
  const sendingDone = Date.now();
  log(`${since(t0, sendingDone)} sending and faults over; settling`);

  // Settle: every acknowledged message final, every event dispatched, every credit carried out.
  const { settled, settleMs, last } = await settle(() => databaseUrl, scale, sendingDone, log);
  await sleep(1000);
  driver.stop();

  stopping = true;
  const stops = await Promise.all([...apps.values()].map(async (app) => [app.name, await app.stop(30000)] as const));

  const rows = await creditRows(databaseUrl);
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
    // A killed worker repeats what it had on the wire, and the answers it had not written yet.
    killBound: (provider, at) => {
      const wire = sendsOnTheWire(provider as ProviderName);
      const answered = providers.receipts().filter((r) => r.provider === provider && r.at <= at && r.at > at - RECORD_WINDOW_MS).length;
      return { bound: wire + answered, how: `${wire} on the wire + ${answered} answered in the last ${RECORD_WINDOW_MS} ms` };
    },
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
  const failed = printChecks(checks, 'chaos');
  return failed ? 1 : 0;
}

main()
  .then((code) => process.exit(code))
  .catch((error) => {
    console.error('chaos: the run could not complete:', error);
    console.log('\nchaos: 0 passed, 1 failed');
    process.exit(1);
  });
