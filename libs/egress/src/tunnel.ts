import http from 'node:http';
import https from 'node:https';
import { Duplex } from 'node:stream';
import tls from 'node:tls';
import { proxyAuthorization, proxyLabel } from './proxy';

// HTTP/2 clients need a socket at once from a synchronous createConnection, but a CONNECT tunnel
// opens later: tunnel() returns a stream at once that holds writes until the proxy agrees.

/** Writes wait in order until attach(). */
class PendingConnection extends Duplex {
  private socket: Duplex | null = null;
  private queued: { chunk: Buffer; callback: (error?: Error | null) => void }[] = [];
  private finishing: ((error?: Error | null) => void) | null = null;
  /** Called when the stream is destroyed before it was attached (the CONNECT request to abort). */
  onAbandon: (() => void) | null = null;

  attach(socket: Duplex, head: Buffer) {
    if (this.destroyed) {
      socket.destroy();
      return;
    }
    this.socket = socket;
    if (head.length) this.push(head);
    socket.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.on('end', () => this.push(null));
    socket.on('error', (error) => this.destroy(error));
    socket.on('close', () => {
      if (!this.destroyed) this.destroy();
    });
    for (const { chunk, callback } of this.queued) socket.write(chunk, callback);
    this.queued = [];
    if (this.finishing) socket.end(this.finishing);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void) {
    if (this.socket) this.socket.write(chunk, callback);
    else this.queued.push({ chunk, callback });
  }

  override _final(callback: (error?: Error | null) => void) {
    if (this.socket) this.socket.end(callback);
    else this.finishing = callback;
  }

  override _read() {
    this.socket?.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void) {
    if (this.socket) this.socket.destroy();
    else this.onAbandon?.();
    callback(error);
  }

  // What http2 and tls may ask of a net.Socket; the tunnel's socket takes them once it is there.
  setNoDelay() {
    return this;
  }
  setKeepAlive() {
    return this;
  }
  setTimeout() {
    return this;
  }
  ref() {
    return this;
  }
  unref() {
    return this;
  }
}

export class ProxyError extends Error {
  readonly code = 'EPROXY';
  constructor(message: string) {
    super(message);
    this.name = 'ProxyError';
  }
}

/** Usable at once; fails with ProxyError when the proxy answers anything but 2xx or not within `timeoutMs`. */
export function tunnel(proxy: URL, host: string, port: number, timeoutMs = 10_000): Duplex {
  const connection = new PendingConnection();
  const authority = `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
  const authorization = proxyAuthorization(proxy);
  const secure = proxy.protocol === 'https:';
  const request = (secure ? https : http).request({
    host: proxy.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: Number(proxy.port || (secure ? 443 : 80)),
    method: 'CONNECT',
    path: authority,
    headers: { host: authority, ...(authorization ? { 'proxy-authorization': authorization } : {}) },
    agent: false,
    timeout: timeoutMs,
  });
  const fail = (message: string) => connection.destroy(new ProxyError(`proxy ${proxyLabel(proxy)}: ${message}`));
  connection.onAbandon = () => request.destroy();
  request.on('connect', (answer: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    request.setTimeout(0);
    const status = answer.statusCode ?? 0;
    if (status < 200 || status >= 300) {
      socket.destroy();
      return fail(`answered ${status} to CONNECT ${authority}`);
    }
    connection.attach(socket, head);
  });
  request.on('timeout', () => {
    request.destroy();
    fail(`no answer to CONNECT ${authority} within ${timeoutMs} ms`);
  });
  request.on('error', (error) => fail(`${error.message} (CONNECT ${authority})`));
  request.end();
  return connection;
}

export interface TlsTarget extends tls.ConnectionOptions {
  host: string;
  port: number;
}

export function connectTls(target: TlsTarget, proxy: URL | null, timeoutMs?: number): tls.TLSSocket {
  const servername = target.servername ?? (target.host.match(/^[\d.]+$|:/) ? undefined : target.host);
  if (!proxy) return tls.connect({ ...target, servername });
  return tls.connect({ ...target, servername, socket: tunnel(proxy, target.host, target.port, timeoutMs) });
}
