// Memory of the processes a long bench run drives, from Linux's /proc (0 elsewhere): sampled every
// second, then summarised at points of the run, so memory that keeps growing shows as growth.
import { readFileSync } from 'node:fs';
import { pidsNamed } from './cpu';

/** A field of /proc/<pid>/status or smaps_rollup, in KiB (VmRSS, VmHWM, Pss). */
export function procKiB(pid: number | 'self' | undefined, field: string, file = 'status'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/${file}`, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** One second of the run: what each named process held (KiB), and when. */
export interface MemorySample {
  at: number;
  kib: Record<string, number>;
}

/** PostgreSQL's and Redis's server processes, summed: RSS counts the shared buffers each one touched, Pss shares them out. */
export function storeMemory(postgresPids: number[]): Record<string, number> {
  const redis = pidsNamed('redis-server');
  return {
    'PostgreSQL RSS': postgresPids.reduce((sum, pid) => sum + procKiB(pid, 'VmRSS'), 0),
    'PostgreSQL Pss': postgresPids.reduce((sum, pid) => sum + procKiB(pid, 'Pss', 'smaps_rollup'), 0),
    'Redis RSS': redis.reduce((sum, pid) => sum + procKiB(pid, 'VmRSS'), 0),
  };
}

const mib = (kib: number) => `${(kib / 1024).toFixed(0)}`;

/**
 * Each series at 10%, 50%, 90% and 100% of the run (the median of the samples in the 5% of the run
 * before the point, so one garbage collection does not decide it), its peak, and its growth from
 * 25% to 100%: flat when under `flatMiB`, or under a tenth of what it held at 25% when that is more.
 */
export function memoryLines(samples: MemorySample[], peaks: Record<string, number>, flatMiB: number): string[] {
  if (samples.length < 2) return ['memory: too few samples'];
  const first = samples[0].at;
  const span = samples[samples.length - 1].at - first;
  const at = (series: string, share: number) => {
    const end = first + share * span;
    const window = samples.filter((s) => s.at <= end && s.at >= end - 0.05 * span).map((s) => s.kib[series] ?? 0);
    const values = window.length ? window : [samples.find((s) => s.at >= end)?.kib[series] ?? 0];
    values.sort((a, b) => a - b);
    return values[Math.floor(values.length / 2)];
  };
  const lines = [`memory in MiB (${samples.length} samples, one a second) at 10% / 50% / 90% / 100% of the run; peak; growth from 25% to 100%:`];
  for (const series of Object.keys(samples[samples.length - 1].kib)) {
    const quarter = at(series, 0.25);
    const growth = at(series, 1) - quarter;
    const limit = Math.max(flatMiB * 1024, quarter / 10);
    const peak = peaks[series] ?? Math.max(...samples.map((s) => s.kib[series] ?? 0));
    const verdict = growth <= limit ? 'flat' : `GROWING (by more than ${mib(limit)} MiB)`;
    lines.push(`  ${series}: ${[0.1, 0.5, 0.9, 1].map((share) => mib(at(series, share))).join(' / ')}; peak ${mib(peak)}; ${growth >= 0 ? '+' : ''}${mib(growth)}: ${verdict}`);
  }
  return lines;
}
