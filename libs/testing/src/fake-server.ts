import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { InFlightCounter } from './in-flight';
import { testTls } from './tls';

// What the fake provider servers share: reading a request's body, waiting, listening on a port of
// loopback the system picks, and (the HTTPS/1.1 ones) their server, connections and counts.

/** A request's whole body, as UTF-8 text. */
export function readBody(req: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Listens on 127.0.0.1, on a port the system picks; answers the port (rejects if it cannot listen). */
export async function listenLocally(server: net.Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as net.AddressInfo).port;
}

/**
 * A local HTTPS/1.1 server standing in for a provider's API: test certificate, numbered connections,
 * requests in flight per connection, a close that cuts everything. A subclass answers in `handle`.
 */
export abstract class LocalHttpsFake {
  port = 0;
  /** PEM of the CA that signed the fake's certificate: the provider's `ca`. */
  readonly ca: string;
  /** TLS connections accepted so far (a keep-alive client opens few). */
  connections = 0;

  protected readonly server: https.Server;
  protected readonly sockets = new Set<Socket>();
  private readonly counter = new InFlightCounter<Socket>();
  private readonly connectionIds = new WeakMap<Socket, number>();
  private closed = false;

  /** `failed` answers a request whose handling threw before it was answered. */
  protected constructor(failed: (res: ServerResponse, error: Error) => void) {
    const tls = testTls();
    this.ca = tls.ca;
    this.server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      this.handle(req, res).catch((error: Error) => {
        if (!res.headersSent) failed(res, error);
      });
    });
    this.server.on('secureConnection', (socket: Socket) => {
      this.connections += 1;
      this.connectionIds.set(socket, this.connections);
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    // A client that goes away mid-handshake is not the fake's failure.
    this.server.on('tlsClientError', () => undefined);
  }

  protected abstract handle(req: IncomingMessage, res: ServerResponse): Promise<void>;

  /** Listens on loopback; answers the fake, once it does. */
  protected async listen(): Promise<this> {
    this.port = await listenLocally(this.server);
    return this;
  }

  /** https://127.0.0.1:port: what the provider's endpoint names to send here. */
  get origin(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** Requests taken and not answered yet, now, and the most there have been at once. */
  get inFlight(): number {
    return this.counter.now;
  }
  get peakInFlight(): number {
    return this.counter.peak;
  }
  /** The most connections carrying a request at once. */
  get peakBusyConnections(): number {
    return this.counter.peakBusyConnections;
  }
  /** TLS connections open now. */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Forgets the peaks of requests in flight. */
  resetPeaks(): this {
    this.counter.resetPeaks();
    return this;
  }

  /** Stops listening and cuts every connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closing;
  }

  /** Counts this request in flight until its answer is over; answers the number of its connection. */
  protected opened(req: IncomingMessage, res: ServerResponse): number {
    const socket = req.socket;
    this.counter.opened(socket);
    res.once('close', () => this.counter.settled(socket));
    return this.connectionIds.get(socket) ?? 0;
  }
}
