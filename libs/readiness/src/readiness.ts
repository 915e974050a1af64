// Readiness as every app reports it (/health/ready): each store's state and, for a store whose
// check names one, the server it reached. The metrics port and the gateway answer it; the queue
// library's Redis check answers a StoreServer.

/** Longest a readiness check of one store may take before the store counts as down. */
export const CHECK_TIMEOUT_MS = 2000;

export type StoreState = 'up' | 'down';

/**
 * What a check may answer beyond "the store answers": the server it reached, reported beside the
 * state as `<store>_server`, and whether the app can work with it (a replica answers, but refuses
 * writes: the store is down for the app).
 */
export class StoreServer {
  constructor(
    readonly usable: boolean,
    readonly server: object,
  ) {}
}

/** How one store fared: `up` when `check` answers within CHECK_TIMEOUT_MS (with a usable server). */
export async function probeStore(check: () => Promise<unknown>): Promise<{ state: StoreState; server?: object }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
  });
  try {
    const answer = await Promise.race([check(), timeout]);
    if (answer instanceof StoreServer) return { state: answer.usable ? 'up' : 'down', server: answer.server };
    return { state: 'up' };
  } catch {
    return { state: 'down' };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Each store's state (`postgres: "up"`), the server of those that name one (`redis_server: {...}`),
 * and ready only when every store is up.
 */
export async function readiness(checks: Record<string, () => Promise<unknown>>): Promise<{ ready: boolean; report: Record<string, unknown> }> {
  const names = Object.keys(checks);
  const results = await Promise.all(names.map((name) => probeStore(checks[name])));
  const report: Record<string, unknown> = {};
  names.forEach((name, i) => {
    report[name] = results[i].state;
    if (results[i].server) report[`${name}_server`] = results[i].server;
  });
  return { ready: results.every((result) => result.state === 'up'), report };
}

/** A readiness report without the servers of its stores (their addresses): each store's state only. */
export function withoutServers(report: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(report).filter(([name]) => !name.endsWith('_server')));
}
