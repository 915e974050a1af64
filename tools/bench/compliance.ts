// The responsible-gambling gate's stage: one FCM worker sends a campaign of one-device pushes to
// distinct players, each checked against a local operator endpoint that answers
// BENCH_COMPLIANCE_DELAY_MS late: players/s with no gate, with the gate's cache cold (two lookups
// a player), and warm (the same players again, no lookup).
import { spawn, type ChildProcess } from 'node:child_process';
import { FakeCompliance, optedIn } from '@operator/testing';
import { cpuMs } from './cpu';
import { stopApp } from './processes';
import type { Figure } from './far-send';

const env = process.env;
export const GATE_PLAYERS = Number(env.BENCH_COMPLIANCE_PLAYERS || 10000);
export const GATE_DELAY_MS = Number(env.BENCH_COMPLIANCE_DELAY_MS || 20);
const API_KEY = 'bench-compliance-key';

export interface ComplianceDeps {
  appEnv: NodeJS.ProcessEnv;
  /** What the FCM worker needs to send to the local FCM. */
  workerEnv: Record<string, string>;
  /** Registers one FCM device for each of these players. */
  register(players: string[]): Promise<void>;
  /** Accepts one push to each of these players (batches through the gateway). */
  accept(players: string[]): Promise<void>;
  /** Whether a job has taken pushes, and whether nothing is left to send: cheap, for polling. */
  sending(): Promise<{ started: boolean; done: boolean }>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


export const GATE_ROWS: [string, string, 'gateOff' | 'gateCold' | 'gateWarm'][] = [
  ['gate: none', `one FCM worker, ${GATE_PLAYERS} players with one device each, no COMPLIANCE_URL`, 'gateOff'],
  ['gate: cold cache', `the same, each player asked at an endpoint answering in ${GATE_DELAY_MS} ms`, 'gateCold'],
  ['gate: warm cache', 'the same players again, answers cached', 'gateWarm'],
];

export async function complianceStage(deps: ComplianceDeps): Promise<Record<'gateOff' | 'gateCold' | 'gateWarm', Figure>> {
  const players = Array.from({ length: GATE_PLAYERS }, (_, i) => `gate-player-${Date.now().toString(36)}-${i}`);
  await deps.register(players);
  // Every player may get pushes: the gate's full path (both lookups, the verdict) for each.
  const operator = await FakeCompliance.start({ apiKey: API_KEY, delayMs: GATE_DELAY_MS, unknown: optedIn() });
  const gateEnv = {
    COMPLIANCE_URL: operator.url,
    COMPLIANCE_API_KEY: API_KEY,
    // Long enough that the warm campaign finds every answer.
    COMPLIANCE_CACHE_TTL: '10m',
    ...(env.BENCH_COMPLIANCE_CONCURRENCY ? { COMPLIANCE_CONCURRENCY: env.BENCH_COMPLIANCE_CONCURRENCY } : {}),
  };
  const start = (extra: Record<string, string>) =>
    spawn(process.execPath, ['dist/apps/push-worker-fcm/main.js'], { env: { ...deps.appEnv, ...deps.workerEnv, ...extra }, stdio: ['ignore', 'ignore', 'inherit'] });

  /** From the first batch posted until no push is open: players/s, the endpoint's requests and the worker's CPU per player. */
  const campaign = async (worker: ChildProcess): Promise<Figure> => {
    const requestsBefore = operator.requests;
    const cpuBefore = cpuMs(worker.pid);
    const started = performance.now();
    await deps.accept(players);
    const accepted = (performance.now() - started) / 1000;
    const deadline = Date.now() + 600_000;
    while (!(await deps.sending()).done) {
      if (Date.now() > deadline || worker.exitCode !== null) throw new Error('the FCM worker did not finish the campaign');
      await sleep(50);
    }
    const seconds = (performance.now() - started) / 1000;
    const rate = players.length / seconds;
    const cpu = ((cpuMs(worker.pid) - cpuBefore) * 1000) / players.length;
    const lookups = operator.requests - requestsBefore;
    return {
      text: `${rate.toFixed(0)} players/s (${players.length} in ${seconds.toFixed(1)} s, accepted in ${accepted.toFixed(1)} s; ${lookups} requests to the endpoint; worker CPU per player ${cpu.toFixed(0)} µs)`,
      rate,
    };
  };
  /** A worker started, given a second to connect before the campaign is posted. */
  const withWorker = async <T>(extra: Record<string, string>, run: (worker: ChildProcess) => Promise<T>): Promise<T> => {
    const worker = start(extra);
    try {
      await sleep(1000);
      return await run(worker);
    } finally {
      await stopApp(worker);
    }
  };

  try {
    const gateOff = await withWorker({}, campaign);
    return await withWorker(gateEnv, async (worker) => {
      const gateCold = await campaign(worker);
      const gateWarm = await campaign(worker);
      return { gateOff, gateCold, gateWarm };
    });
  } finally {
    await operator.close();
  }
}
