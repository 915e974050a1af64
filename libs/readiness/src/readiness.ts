// Readiness as every app reports it (/health/ready): each store's state and the server it reached.

/** Longest a readiness check of one store may take before the store counts as down. */
export const CHECK_TIMEOUT_MS = 2000;

export type StoreState = 'up' | 'down';

/** The server a check reached, and whether the app can work with it (a replica refuses writes: down). */
export class StoreServer {
  constructor(
    readonly usable: boolean,
    readonly server: object,
  ) {}
}

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

/** Without the servers' addresses. */
export function withoutServers(report: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(report).filter(([name]) => !name.endsWith('_server')));
}
