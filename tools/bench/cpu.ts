// CPU time used by the processes a bench stage runs on, read from Linux's /proc (0 elsewhere): to
// say where a stage's time goes (the apps, PostgreSQL, Redis, the bench's own process) per request
// or message.
import { readdirSync, readFileSync } from 'node:fs';

/** CPU time a process has used so far, in ms, in user space and in the kernel (0 if it is gone or not on Linux). */
function userAndKernelMs(pid: number | undefined): { user: number; kernel: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime, in clock ticks of 10 ms.
    return { user: Number(fields[11]) * 10, kernel: Number(fields[12]) * 10 };
  } catch {
    return { user: 0, kernel: 0 };
  }
}

/** CPU time a process has used so far, in ms (its utime and stime; 0 if it is gone or not on Linux). */
export function cpuMs(pid: number | undefined): number {
  const { user, kernel } = userAndKernelMs(pid);
  return user + kernel;
}

/** The ids of the running processes whose command name is `name` (PostgreSQL's: `postgres`). */
function pidsNamed(name: string): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number)
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name;
        } catch {
          return false;
        }
      });
  } catch {
    return [];
  }
}

/** The CPU used so far by the named apps, every PostgreSQL process, Redis and this process. */
export interface CpuSample {
  apps: Map<string, { user: number; kernel: number }>;
  postgres: Map<number, number>;
  redis: number;
  bench: number;
}

/** A sample of the CPU used so far by `apps` (name: pid) and the stores. */
export function sampleCpu(apps: Record<string, number | undefined>): CpuSample {
  const usage = process.cpuUsage();
  return {
    apps: new Map(Object.entries(apps).map(([name, pid]) => [name, userAndKernelMs(pid)])),
    postgres: new Map(pidsNamed('postgres').map((pid) => [pid, cpuMs(pid)])),
    redis: pidsNamed('redis-server').reduce((sum, pid) => sum + cpuMs(pid), 0),
    bench: (usage.user + usage.system) / 1000,
  };
}

/** The CPU used between two samples, in ms: each app's (and how much of it in the kernel), PostgreSQL's, Redis's and this process's. */
export interface CpuUsed {
  apps: { name: string; ms: number; kernelMs: number }[];
  postgres: number;
  redis: number;
  bench: number;
}

/**
 * The CPU used between two samples. PostgreSQL's backends come and go: one that began between the
 * samples (an app started for the stage connects) counts whole; one that ended between them is not
 * counted (the apps' pools keep theirs through a stage).
 */
export function cpuBetween(before: CpuSample, after: CpuSample): CpuUsed {
  let postgres = 0;
  for (const [pid, ms] of after.postgres) postgres += ms - (before.postgres.get(pid) ?? 0);
  const apps = [...after.apps].map(([name, { user, kernel }]) => {
    const earlier = before.apps.get(name) ?? { user, kernel };
    return { name, ms: user - earlier.user + kernel - earlier.kernel, kernelMs: kernel - earlier.kernel };
  });
  return { apps, postgres, redis: after.redis - before.redis, bench: after.bench - before.bench };
}

/**
 * "gateway 61 µs (4 µs of it in the kernel), PostgreSQL 80 µs, Redis 2 µs, load generator 5 µs":
 * the CPU per one of `units`; `bench` names what this process did in the stage.
 */
export function cpuPer(used: CpuUsed, units: number, bench: string): string {
  const us = (ms: number) => `${Math.round((ms * 1000) / units)} µs`;
  const apps = used.apps.map((app) => `${app.name} ${us(app.ms)} (${us(app.kernelMs)} of it in the kernel)`);
  return [...apps, `PostgreSQL ${us(used.postgres)}`, `Redis ${us(used.redis)}`, `${bench} ${us(used.bench)}`].join(', ');
}
