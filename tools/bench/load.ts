// A small closed-loop load generator: `connections` keep-alive connections, each sending its next
// request as soon as the last one is answered, for a fixed time. Latencies are kept per request.
import http from 'node:http';

export interface LoadResult {
  requests: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Answers by status code. */
  statuses: Record<number, number>;
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export interface Request {
  path: string;
  body: string;
  headers?: Record<string, string>;
}

function send(agent: http.Agent, port: number, request: Request): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: request.path,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(request.body), ...request.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(request.body);
  });
}

export async function load(port: number, connections: number, seconds: number, next: () => Request, onAnswer?: (status: number, body: string) => void): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) {
        const at = performance.now();
        const answer = await send(agent, port, next());
        latencies.push(performance.now() - at);
        statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
        onAnswer?.(answer.status, answer.body);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { requests: latencies.length, seconds: elapsed, perSecond: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), statuses };
}

/**
 * Sends each request once, at most `inFlight` at a time; answers the wall time and latencies.
 * `requests` may be a generator, so a long run makes each body only when it is sent.
 */
export async function each(port: number, inFlight: number, requests: Iterable<Request>, onAnswer?: (status: number, body: string) => void) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight });
  const latencies: number[] = [];
  const iterator = requests[Symbol.iterator]();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Array.isArray(requests) ? Math.min(inFlight, requests.length) : inFlight }, async () => {
      for (let next = iterator.next(); !next.done; next = iterator.next()) {
        const request = next.value;
        const at = performance.now();
        const answer = await send(agent, port, request);
        latencies.push(performance.now() - at);
        if (answer.status >= 300) throw new Error(`${request.path} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
        onAnswer?.(answer.status, answer.body);
      }
    }),
  );
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { seconds: (performance.now() - started) / 1000, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}
