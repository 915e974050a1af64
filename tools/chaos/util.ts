export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** kill -9 of a whole process group (the children are started detached, each its own group). */
export function killGroup(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Seconds since the start of the run, for the report. */
export const since = (t0: number, at: number) => `+${((at - t0) / 1000).toFixed(1)}s`;
