import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

// A real HTTP server on 127.0.0.1 standing in for the operator's /userblocks and /userconsents in
// this library's specs: what it answers per player, and what it was asked.

export interface PlayerRecords {
  blocks?: { active?: boolean; type: string; note?: string }[];
  consents?: { opted_in?: boolean; type: string }[];
}

/** How one path answers instead of its records. */
export type Answer = { status: number; body?: string; headers?: Record<string, string> } | 'hang';

export interface SpecServer {
  url: string;
  /** By decoded user id; a player absent from it is answered 404. */
  records: Map<string, PlayerRecords>;
  /** By `/userblocks/<encoded id>` or `/userconsents/<encoded id>`: overrides the records. */
  answers: Map<string, Answer>;
  delayMs: number;
  /** Each request's path and headers, in arrival order. */
  requests: { path: string; headers: IncomingHttpHeaders }[];
  inFlight: number;
  maxInFlight: number;
  count(path: string): number;
  /** Resolves when `n` requests have arrived in all. */
  arrived(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSpecServer(prefix = ''): Promise<SpecServer> {
  let waiters: { n: number; resolve: () => void }[] = [];
  const state: Omit<SpecServer, 'url' | 'close'> = {
    records: new Map(),
    answers: new Map(),
    delayMs: 0,
    requests: [],
    inFlight: 0,
    maxInFlight: 0,
    count: (path) => state.requests.filter((request) => request.path === path).length,
    arrived: (n) => (state.requests.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
  };
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').slice(prefix.length);
    state.requests.push({ path, headers: request.headers });
    state.inFlight += 1;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    waiters = waiters.filter((waiter) => (state.requests.length >= waiter.n ? (waiter.resolve(), false) : true));
    const answer = state.answers.get(path);
    if (answer === 'hang') {
      response.on('close', () => (state.inFlight -= 1));
      return;
    }
    // The records as they are when the request arrives: a change after it is not in this answer.
    const match = /^\/(userblocks|userconsents)\/([^/]+)$/.exec(path);
    const records = match ? state.records.get(decodeURIComponent(match[2])) : undefined;
    const body = records && (match![1] === 'userblocks' ? { blocks: records.blocks ?? [] } : { consents: records.consents ?? [] });
    setTimeout(() => {
      state.inFlight -= 1;
      if (answer) {
        response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(answer.body ?? '{}');
      } else if (!body) {
        response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      } else {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      }
    }, state.delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}${prefix}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  }) as SpecServer;
}

export const OPTED_IN = [{ type: 'pushNotification', opted_in: true }];
