import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readiness } from '@operator/readiness';
import { METRICS_CONTENT_TYPE, metricsText } from './catalog';
import type { StoreGauges } from './store-gauges';

export interface MetricsServerOptions {
  /** 0 takes any free port. */
  port: number;
  /** By store; a check may answer a StoreServer. */
  checks: Record<string, () => Promise<unknown>>;
  stores?: StoreGauges;
}

export interface MetricsServer {
  readonly port: number;
  /** From now on /health/ready answers 503. */
  shuttingDown(): void;
  close(): Promise<void>;
}

export class MetricsPortError extends Error {}

function json(response: http.ServerResponse, status: number, body: object) {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}

/** The operations port of an app that serves no HTTP of its own, answering as the gateway does. */
export async function startMetricsServer({ port, checks, stores }: MetricsServerOptions): Promise<MetricsServer> {
  let stopping = false;

  async function ready(response: http.ServerResponse) {
    if (stopping) return json(response, 503, { error: 'not ready', reason: 'shutting down' });
    const { ready, report } = await readiness(checks);
    if (ready) return json(response, 200, { status: 'ready', ...report });
    return json(response, 503, { error: 'not ready', ...report });
  }

  async function metrics(response: http.ServerResponse) {
    await stores?.refresh();
    const text = await metricsText();
    response.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE }).end(text);
  }

  const routes = new Map<string, (response: http.ServerResponse) => void | Promise<void>>([
    ['/metrics', metrics],
    ['/health/ready', ready],
    ['/health/live', (response) => json(response, 200, { status: 'ok' })],
  ]);

  const server = http.createServer((request, response) => {
    if (request.method !== 'GET') return json(response, 405, { error: 'method not allowed' });
    const route = routes.get(request.url?.split('?')[0] ?? '') ?? ((answer: http.ServerResponse) => json(answer, 404, { error: 'not found' }));
    Promise.resolve()
      .then(() => route(response))
      .catch((error: Error) => {
        if (!response.headersSent) json(response, 500, { error: error.message });
        else response.destroy();
      });
  });
  // A scraper that stops mid-request does not hold a socket for long.
  server.headersTimeout = 10000;
  server.requestTimeout = 15000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE' ? 'is already in use' : `cannot be listened on (${error.code ?? error.message})`;
      reject(new MetricsPortError(`METRICS_PORT ${port} ${why}: set METRICS_PORT to a free port (0 takes any)`));
    });
    server.listen(port, () => resolve());
  });

  return {
    port: (server.address() as AddressInfo).port,
    shuttingDown() {
      stopping = true;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
