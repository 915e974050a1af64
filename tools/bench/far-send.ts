// The "far provider" stage: one push worker drains one-device pushes to an FCM and an APNs that
// answer BENCH_FAR_DELAY_MS late, as a distant provider would: sends/s and the most on the wire.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import type { FakeApns, FakeFcm } from '@operator/testing';
import { Providers } from '../chaos/providers';
import { cpuMs } from './cpu';

const env = process.env;
export const FAR_SENDS = Number(env.BENCH_FAR_SENDS || 30000);
export const FAR_DELAY_MS = Number(env.BENCH_FAR_DELAY_MS || 30);
const CPU_PROFILES = env.BENCH_CPU_PROF || '';

export interface FarSendDeps {
  dir: string;
  appEnv: NodeJS.ProcessEnv;
  accept(provider: 'fcm' | 'apns', count: number): Promise<void>;
  /** Deliveries still to send (counted once a stage: the count reads every open push). */
  toSend(): Promise<number>;
  /** Whether a job has taken pushes, and whether nothing is left to send: cheap, for polling. */
  sending(): Promise<{ started: boolean; done: boolean }>;
}

export interface Figure {
  text: string;
  rate: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/**
 * One worker drains what is queued: timed from the first job it takes to the last delivery, so that
 * its start (bundle load, connections) is not counted.
 */
async function drain(deps: FarSendDeps, app: string, extra: Record<string, string>): Promise<{ sends: number; seconds: number; workerCpuMs: number; benchCpuMs: number }> {
  const queued = await deps.toSend();
  const profile = CPU_PROFILES ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROFILES}`, `--cpu-prof-name=${app}-far-${Date.now()}.cpuprofile`] : [];
  const worker = spawn(process.execPath, [...profile, `dist/apps/${app}/main.js`], { env: { ...deps.appEnv, ...extra }, stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    const deadline = Date.now() + 600_000;
    while (!(await deps.sending()).started) {
      if (Date.now() > deadline || worker.exitCode !== null) throw new Error(`${app} sent nothing`);
      await sleep(20);
    }
    const started = performance.now();
    const [workerCpu, benchCpu] = [cpuMs(worker.pid), process.cpuUsage()];
    while (!(await deps.sending()).done) {
      if (Date.now() > deadline || worker.exitCode !== null) throw new Error(`${app} did not finish sending`);
      await sleep(50);
    }
    const bench = process.cpuUsage(benchCpu);
    return { sends: queued, seconds: (performance.now() - started) / 1000, workerCpuMs: cpuMs(worker.pid) - workerCpu, benchCpuMs: (bench.user + bench.system) / 1000 };
  } finally {
    await stop(worker);
  }
}

function figure(result: Awaited<ReturnType<typeof drain>>, fake: { peakInFlight: number; sessions: number }): Figure {
  const rate = result.sends / result.seconds;
  const perSend = (ms: number) => ((ms * 1000) / result.sends).toFixed(0);
  return {
    text: `${rate.toFixed(0)} sends/s (${result.sends}; at most ${fake.peakInFlight} in flight on ${fake.sessions} connections; CPU per send: worker ${perSend(result.workerCpuMs)} µs, fake server ${perSend(result.benchCpuMs)} µs)`,
    rate,
  };
}

export async function farSend(deps: FarSendDeps): Promise<{ farFcm: Figure; farApns: Figure }> {
  // FCM allows 100 streams per connection; APNs announces several hundred.
  const providers = await Providers.start(mkdtempSync(join(deps.dir, 'far-')), {
    fcm: { maxConcurrentStreams: 100, answerDelayMs: FAR_DELAY_MS },
    apns: { maxConcurrentStreams: 1000, answerDelayMs: FAR_DELAY_MS },
  });
  try {
    const measure = async (provider: 'fcm' | 'apns', fake: FakeFcm | FakeApns) => {
      await deps.accept(provider, FAR_SENDS);
      fake.resetPeaks();
      const sessionsBefore = fake.sessions;
      const result = await drain(deps, `push-worker-${provider}`, providers.workerEnv());
      return figure(result, { peakInFlight: fake.peakInFlight, sessions: fake.sessions - sessionsBefore });
    };
    const farFcm = await measure('fcm', providers.fcm);
    const farApns = await measure('apns', providers.apns);
    return { farFcm, farApns };
  } finally {
    await providers.close();
  }
}
