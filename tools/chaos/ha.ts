// `npm run chaos -- --ha`: the service on highly available stores (Redis with Sentinels, or a
// Cluster with --cluster; PostgreSQL with a synchronous standby behind PgBouncer), every app twice.
// While the CRM sends, each store fails over; the verdicts are the fault suite's, plus each gateway
// answering 2xx again soon after each failover.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROVIDER_NAMES as PROVIDERS } from '@operator/provider-registry';
import {
  FakeCrm,
  freePort,
  freePorts,
  seededRandom,
  startCluster,
  startPgBouncer,
  startPostgresPair,
  startSentinelTopology,
  type PgBouncer,
  type PostgresPair,
  type RedisClusterTopology,
  type RedisServerAddress,
  type SentinelTopology,
} from '@operator/testing';
import { App, type Exit } from './apps';
import { checkAnswers, checkCredits, checkDuplicates, checkNothingLost, checkRecovery, checkStatuses, type Check, type RunRecord } from './checks';
import { CrmDriver } from './crm';
import type { Fault } from './faults';
import { Providers } from './providers';
import { parseHaOptions } from './scale';
import { freshDatabase } from './stores';
import { since, sleep } from './util';
import { APPS, WORKER_CONCURRENCY, WORKER_PARALLEL_MESSAGES, appEnv, creditRows, planWorkload, printChecks, registerDevices, send, settle, until } from './workload';

const REPLICAS = 2;

const options = parseHaOptions(process.argv.slice(2));
const { scale } = options;
const rng = seededRandom(options.seed);
const dir = mkdtempSync(join(tmpdir(), 'operator-ha-'));
const apps: App[] = [];
const faults: Fault[] = [];
const stores: { stop(): Promise<void> }[] = [];
let stopping = false;

/** Kills the apps and the stores (each store's stop kills its processes), then exits. */
async function exit(code: number): Promise<never> {
  stopping = true;
  for (const app of apps) app.killNow();
  await Promise.allSettled(stores.reverse().map((store) => store.stop()));
  if (!options.keep) rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    console.error(`chaos: ${signal}, stopping`);
    void exit(130);
  });
}
const hardTimeout = setTimeout(() => {
  console.error(`chaos: hard timeout after ${scale.hardTimeoutMs / 1000} s`);
  console.log('\nchaos: 0 passed, 1 failed');
  void exit(1);
}, scale.hardTimeoutMs);
hardTimeout.unref();

const log = (text: string) => console.log(`chaos: ${text}`);


/** Records a fault while `work` carries it out; it is over when `work` resolves. */
async function fault(kind: Fault['kind'], work: () => Promise<string | void>): Promise<void> {
  const record: Fault = { kind, at: Date.now() };
  faults.push(record);
  log(`${kind}`);
  const detail = await work();
  record.endAt = Date.now();
  if (detail) record.detail = detail;
  log(`${kind} over in ${((record.endAt - record.at) / 1000).toFixed(1)} s${detail ? `: ${detail}` : ''}`);
}

async function main(): Promise<number> {
  const started = Date.now();
  const topology = options.cluster ? 'Redis Cluster (3 masters, a replica each)' : 'Redis master, replica and 3 Sentinels';
  log(`HA run (${topology}; PostgreSQL primary and synchronous standby behind PgBouncer), seed ${options.seed}: ${scale.messages} messages, ${scale.credits} credits, ${scale.sendMs / 1000} s of sending; files in ${dir}`);

  const postgres: PostgresPair = await startPostgresPair({ synchronous: true });
  stores.push(postgres);
  const named = (url: string) => {
    const parsed = new URL(url);
    parsed.pathname = '/operator_api';
    return parsed.toString();
  };
  let primaryUrl = named(postgres.primaryUrl);
  freshDatabase(primaryUrl);
  const bouncer: PgBouncer = await startPgBouncer(primaryUrl);
  stores.push(bouncer);
  let sentinel: SentinelTopology | undefined;
  let cluster: RedisClusterTopology | undefined;
  // The apps are given a REDIS_URL that nothing answers: with Sentinel or Cluster it must not be used.
  const redisEnv: Record<string, string> = { REDIS_URL: `redis://127.0.0.1:${await freePort()}` };
  mkdirSync(join(dir, 'redis'));
  if (options.cluster) {
    cluster = await startCluster({ dir: join(dir, 'redis'), masters: 3, replicas: 1 });
    stores.push(cluster);
    redisEnv.REDIS_CLUSTER_NODES = cluster.nodeList;
  } else {
    sentinel = await startSentinelTopology({ dir: join(dir, 'redis') });
    stores.push(sentinel);
    redisEnv.REDIS_SENTINELS = sentinel.sentinelList;
    redisEnv.REDIS_SENTINEL_NAME = sentinel.masterName;
  }

  const providers = await Providers.start(dir);
  const crm = await FakeCrm.start();
  const ports = await freePorts(2);
  const bases = ports.map((port) => `http://127.0.0.1:${port}`);
  const env: NodeJS.ProcessEnv = {
    ...appEnv(providers, crm, 'ha'),
    DATABASE_URL: bouncer.url,
    MIGRATE_DATABASE_URL: primaryUrl,
    ...redisEnv,
  };
  mkdirSync(join(dir, 'logs'));
  const onCrash = (exit: Exit) => {
    faults.push({ kind: 'crash', target: exit.app, at: exit.at, detail: exit.how });
    log(`${exit.app} ended on its own (${exit.how}); starting it again`);
    if (!stopping) setTimeout(() => !stopping && apps.find((app) => app.id === exit.app)?.start(), 1000);
  };
  for (const name of APPS) {
    for (let replica = 1; replica <= REPLICAS; replica += 1) {
      const own = name === 'gateway' ? { PORT: String(ports[replica - 1]) } : {};
      apps.push(new App(name, { ...env, ...own }, join(dir, 'logs'), onCrash, replica));
    }
  }
  for (const app of apps) app.start();
  for (const base of bases) {
    if (!(await until(async () => (await fetch(`${base}/health/ready`)).ok, 30000))) throw new Error(`the gateway at ${base} did not become ready`);
  }

  let t0 = Date.now();
  const driver = new CrmDriver(bases, rng, () => t0 + scale.sendMs + scale.settleMs);
  const devices = await registerDevices(driver, providers, scale, rng);
  log(`${devices.size} players with ${[...devices.values()].flat().length} devices registered (${((Date.now() - started) / 1000).toFixed(1)} s of setup)`);
  const work = await planWorkload(primaryUrl, devices, scale, rng);
  const { messages, credits } = work;

  t0 = Date.now();
  const at = (ms: number) => sleep(t0 + ms - Date.now());
  const port = (server: RedisServerAddress) => server.port;
  const failing = (async () => {
    if (sentinel) {
      const redis = sentinel;
      await at(scale.redisFailoverAtMs);
      await fault('redis-failover', async () => {
        const before = await redis.currentMaster();
        return `SENTINEL FAILOVER: master :${port(before)} -> :${port(await redis.failover())}`;
      });
      await at(scale.redisKillAtMs);
      await fault('redis-master-kill', async () => {
        const before = await redis.currentMaster();
        return `master :${port(before)} killed -9, Sentinels promoted :${port(await redis.killMaster())}`;
      });
    }
    if (cluster) {
      // The masters of two queues' slots, one after the other: each slot's replica takes over.
      for (const [atMs, queue] of [
        [scale.redisFailoverAtMs, 'push-fcm'],
        [scale.redisKillAtMs, 'push-apns'],
      ] as const) {
        const redis = cluster;
        await at(atMs);
        await fault('redis-master-kill', async () => {
          const { killed, promoted } = await redis.killMaster(`{ha:${queue}}`);
          return `master :${port(killed)} of ${queue}'s slot killed -9, its replica :${port(promoted)} took over`;
        });
      }
    }
    await at(scale.pgFailoverAtMs);
    await fault('pg-failover', async () => {
      await postgres.stopPrimary('fast');
      await postgres.promote();
      primaryUrl = named(postgres.standbyUrl);
      await bouncer.reload(`127.0.0.1:${postgres.standbyPort}`);
      return `primary :${postgres.primaryPort} stopped, standby :${postgres.standbyPort} promoted, PgBouncer switched to it`;
    });
  })();
  await Promise.all([send(driver, work, scale, rng, t0, log, () => faults.length), failing]);
  const sendingDone = Date.now();
  const lastFault = Math.max(...faults.map((f) => f.endAt ?? f.at));
  log(`${since(t0, sendingDone)} sending over; settling`);

  const { settled, settleMs, last } = await settle(() => primaryUrl, scale, lastFault, log);
  await sleep(1000);
  driver.stop();

  stopping = true;
  const stops = await Promise.all(apps.map(async (app) => [app.id, await app.stop(30000)] as const));
  const rows = await creditRows(primaryUrl);
  const run: RunRecord = {
    t0,
    messages,
    credits,
    devices,
    receipts: providers.receipts(),
    webhook: crm.accepted,
    faults,
    driver,
    // Every replica of a provider's worker may have had this many sends in flight at a failover.
    inFlightBound: WORKER_CONCURRENCY * WORKER_PARALLEL_MESSAGES * REPLICAS,
    inFlightWindowMs: scale.inFlightWindowMs,
  };
  const crashes = apps.flatMap((app) => app.crashes);
  const checks: Check[] = [
    checkNothingLost(run),
    checkDuplicates(run),
    checkCredits(run, rows),
    checkStatuses(run),
    checkAnswers(run),
    checkRecovery(run, bases.length, scale.recoveryMs),
    {
      name: 'no app ended on its own',
      ok: crashes.length === 0,
      lines: crashes.length ? crashes.map((c) => `${c.app} ${c.how} at ${since(t0, c.at)}: ${c.tail.split('\n').slice(-3).join(' | ').slice(0, 400)}`) : ['none'],
    },
    {
      name: `nothing pending or sending, every push settled within ${scale.settleMs / 1000} s of the last fault`,
      ok: settled,
      lines: [settled ? `settled ${(settleMs / 1000).toFixed(1)} s after the last fault (${since(t0, lastFault)})` : `after ${(settleMs / 1000).toFixed(1)} s: ${last}`],
    },
    {
      name: 'every app stops on SIGTERM afterwards',
      ok: stops.every(([, how]) => how === 'exit 0'),
      lines: [stops.map(([id, how]) => `${id} ${how}`).join(', ')],
    },
  ];
  await Promise.all([providers.close(), crm.close()]);

  console.log(`\n=== HA report (${topology}, seed ${options.seed}) ===`);
  console.log(`messages: ${messages.length} sent by the CRM, ${messages.filter((m) => m.pushId).length} acknowledged, ${driver.resends.messages} re-sent after acknowledgement`);
  console.log(`credits: ${credits.length} sent, ${credits.filter((c) => c.creditId).length} acknowledged, ${driver.resends.credits} re-sent after 200`);
  console.log(`apps: ${APPS.map((name) => `${name} × ${REPLICAS}`).join(', ')}`);
  console.log(`provider servers accepted: ${PROVIDERS.map((p) => `${p} ${run.receipts.filter((r) => r.provider === p).length}`).join(', ')}`);
  console.log('faults:');
  for (const f of [...faults].sort((a, b) => a.at - b.at)) {
    console.log(`  ${since(t0, f.at).padStart(7)} ${f.kind}${f.target ? ` ${f.target}` : ''}${f.endAt ? ` (over ${since(t0, f.endAt)})` : ''}${f.detail ? ` ${f.detail}` : ''}`);
  }
  console.log(`timing: setup + sending + settling = ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return printChecks(checks, 'chaos') ? 1 : 0;
}

main()
  .then((code) => exit(code))
  .catch((error) => {
    console.error('chaos: the HA run could not complete:', error);
    console.log('\nchaos: 0 passed, 1 failed');
    return exit(1);
  });
