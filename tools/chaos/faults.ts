// The faults of a run, planned from the seed and carried out on a timeline while the CRM sends; each
// is recorded with when it began and ended.
import type { FakeCrm, SeededRandom as Random, TcpProxy } from '@operator/testing';
import type { App } from './apps';
import type { Scale } from './scale';
import type { ChaosRedis } from './stores';
import { sleep } from './util';

export type FaultKind = 'kill' | 'crash' | 'pg-cut' | 'redis-crash' | 'webhook-503' | 'webhook-down' | FailoverKind;

/** The HA run's faults (tools/chaos/ha.ts): each store failing over to its standby. */
export type FailoverKind = 'redis-failover' | 'redis-master-kill' | 'pg-failover';
export const FAILOVER_KINDS: FailoverKind[] = ['redis-failover', 'redis-master-kill', 'pg-failover'];

export interface Fault {
  kind: FaultKind;
  target?: string;
  at: number;
  /** When it was over (the app running again, the store back). */
  endAt?: number;
  detail?: string;
}

interface Planned {
  offsetMs: number;
  kind: Exclude<FaultKind, 'crash' | FailoverKind>;
  target?: string;
  durationMs: number;
}

/**
 * Push worker kills stay clear of the database cuts (and a few seconds after): a worker that cannot
 * record what it sent holds it in memory, so a kill then would blur which sends were in flight.
 */
export function planFaults(scale: Scale, apps: string[], rng: Random): Planned[] {
  const w = scale.sendMs;
  const plan: Planned[] = [];
  const cuts: [number, number][] = [];
  for (let i = 0; i < scale.pgCuts; i += 1) {
    const start = Math.round(w * (0.25 + (0.45 * i) / Math.max(1, scale.pgCuts - 1)));
    cuts.push([start, start + scale.pgCutMs]);
    plan.push({ offsetMs: start, kind: 'pg-cut', durationMs: scale.pgCutMs });
  }
  for (let i = 0; i < scale.redisCrashes; i += 1) {
    plan.push({ offsetMs: Math.round(w * (0.5 + 0.3 * i)), kind: 'redis-crash', durationMs: 1000 });
  }
  const webhookAt = Math.round(w * 0.12);
  plan.push({ offsetMs: webhookAt, kind: 'webhook-503', durationMs: scale.webhook503Ms });
  plan.push({ offsetMs: webhookAt + scale.webhook503Ms, kind: 'webhook-down', durationMs: scale.webhookDownMs });

  // Kills: interleaved across apps, spread over 8%-78% of the window (the rest is left for
  // stalled jobs and lapsed claims to be taken over while the CRM still sends).
  const slots = apps.length * scale.killsPerApp;
  const order: string[] = [];
  for (let round = 0; round < scale.killsPerApp; round += 1) {
    const shuffled = [...apps].sort(() => rng.next() - 0.5);
    order.push(...shuffled);
  }
  order.forEach((app, i) => {
    let offset = Math.round(w * (0.08 + (0.7 * (i + 0.5)) / slots) + (rng.next() - 0.5) * (w * 0.02));
    if (app.startsWith('push-worker-')) {
      for (const [start, end] of cuts) if (offset >= start - 1000 && offset <= end + 4000) offset = end + 4000 + rng.int(0, 1500);
    }
    plan.push({ offsetMs: offset, kind: 'kill', target: app, durationMs: rng.int(300, 1500) });
  });
  return plan.sort((a, b) => a.offsetMs - b.offsetMs);
}

export interface FaultDeps {
  apps: Map<string, App>;
  pgProxy: TcpProxy;
  redis: ChaosRedis;
  crm: FakeCrm;
  aofLossMs: number;
}

export async function runFaults(plan: Planned[], t0: number, deps: FaultDeps, faults: Fault[], stopped: () => boolean): Promise<void> {
  const running: Promise<void>[] = [];
  for (const step of plan) {
    const wait = t0 + step.offsetMs - Date.now();
    if (wait > 0) await sleep(wait);
    if (stopped()) break;
    running.push(runOne(step, deps, faults));
  }
  await Promise.all(running);
}

async function runOne(step: Planned, deps: FaultDeps, faults: Fault[]): Promise<void> {
  const fault: Fault = { kind: step.kind, target: step.target, at: Date.now() };
  faults.push(fault);
  switch (step.kind) {
    case 'kill':
      await deps.apps.get(step.target!)!.kill9(step.durationMs);
      break;
    case 'pg-cut':
      await deps.pgProxy.stop();
      await sleep(step.durationMs);
      await deps.pgProxy.resume();
      break;
    case 'redis-crash': {
      const loss = await deps.redis.crashAndRestart(deps.aofLossMs, step.durationMs);
      fault.detail = loss ? `AOF ${loss.bytesBefore} -> ${loss.bytesAfter} bytes (${loss.bytesBefore - loss.bytesAfter} lost)` : 'no AOF yet';
      break;
    }
    case 'webhook-503':
      deps.crm.respondWith(503, { 'retry-after': '1' });
      await sleep(step.durationMs);
      break;
    case 'webhook-down':
      await deps.crm.down();
      await sleep(step.durationMs);
      deps.crm.reset();
      await deps.crm.up();
      break;
  }
  fault.endAt = Date.now();
}
