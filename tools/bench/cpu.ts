// CPU time of the processes a bench stage runs on, from Linux's /proc (0 elsewhere): where a
// stage's time goes, per request or message.
import { readdirSync, readFileSync } from 'node:fs';

function userAndKernelMs(pid: number | undefined): { user: number; kernel: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime, in clock ticks of 10 ms.
    return { user: Number(fields[11]) * 10, kernel: Number(fields[12]) * 10 };
  } catch {
    return { user: 0, kernel: 0 };
  }
}

export function cpuMs(pid: number | undefined): number {
  const { user, kernel } = userAndKernelMs(pid);
  return user + kernel;
}

export function pidsNamed(name: string): number[] {
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

export interface CpuSample {
  apps: Map<string, { user: number; kernel: number }>;
  postgres: Map<number, number>;
  redis: number;
  bench: number;
}

export function sampleCpu(apps: Record<string, number | undefined>): CpuSample {
  const usage = process.cpuUsage();
  return {
    apps: new Map(Object.entries(apps).map(([name, pid]) => [name, userAndKernelMs(pid)])),
    postgres: new Map(pidsNamed('postgres').map((pid) => [pid, cpuMs(pid)])),
    redis: pidsNamed('redis-server').reduce((sum, pid) => sum + cpuMs(pid), 0),
    bench: (usage.user + usage.system) / 1000,
  };
}

export interface CpuUsed {
  apps: { name: string; ms: number; kernelMs: number }[];
  postgres: number;
  redis: number;
  bench: number;
}

/** A PostgreSQL backend that began between the samples counts whole; one that ended is not counted. */
export function cpuBetween(before: CpuSample, after: CpuSample): CpuUsed {
  let postgres = 0;
  for (const [pid, ms] of after.postgres) postgres += ms - (before.postgres.get(pid) ?? 0);
  const apps = [...after.apps].map(([name, { user, kernel }]) => {
    const earlier = before.apps.get(name) ?? { user, kernel };
    return { name, ms: user - earlier.user + kernel - earlier.kernel, kernelMs: kernel - earlier.kernel };
  });
  return { apps, postgres, redis: after.redis - before.redis, bench: after.bench - before.bench };
}

/** "gateway 61 µs (4 µs of it in the kernel), PostgreSQL 80 µs, ...", per one of `units`. */
export function cpuPer(used: CpuUsed, units: number, bench: string): string {
  const us = (ms: number) => `${Math.round((ms * 1000) / units)} µs`;
  const apps = used.apps.map((app) => `${app.name} ${us(app.ms)} (${us(app.kernelMs)} of it in the kernel)`);
  return [...apps, `PostgreSQL ${us(used.postgres)}`, `Redis ${us(used.redis)}`, `${bench} ${us(used.bench)}`].join(', ');
}
