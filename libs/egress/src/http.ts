import net from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { Agent, Pool, ProxyAgent, request, type buildConnector, type Dispatcher } from 'undici';
import { setDeadline } from './deadline';
import { assertPublicHost, publicOnlyLookup } from './guard';
import { proxyFor, type ProxySettings } from './proxy';

// Every HTTP/1.1 call to a peer we do not control: one deadline, a capped body, a 3xx is an answer,
// never followed. Plain http goes to the proxy in absolute form: most refuse CONNECT to other than 443.

export interface OutboundOptions {
  proxy?: ProxySettings;
  /** A local test server's CA; the system roots otherwise. */
  ca?: string | Buffer | (string | Buffer)[];
  /** Default unlimited. */
  connectionsPerOrigin?: number;
  keepAliveTimeoutMs?: number;
  /** Requests written on one connection before its first answer (HTTP/1.1 pipelining); only those marked `pipelined` are. Default 1. */
  pipelining?: number;
  /** Opens every connection itself, TLS included: `proxy`, `ca` and `publicOnly` are then its business. */
  connect?: (target: OutboundTarget) => Duplex;
}

export interface OutboundTarget {
  host: string;
  port: number;
  servername: string;
}

export interface OutboundRequest {
  url: string | URL;
  method?: 'POST' | 'GET' | 'PUT';
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs: number;
  /** The rest is dropped with the connection. */
  maxBodyBytes: number;
  /** Through a proxy, names are the proxy's to check. */
  publicOnly?: boolean;
  /** Done once a 2xx status comes (a push service's 201 means taken); the body is drained apart. */
  successWithoutBody?: boolean;
  /**
   * May be written behind others on a connection before their answers (see `pipelining`): the
   * request may be sent again without harm (undici sends again those behind a dropped connection)
   * and its answer is expected at once.
   */
  pipelined?: boolean;
}

export interface OutboundAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  truncated: boolean;
}

export type OutboundFailure = 'timeout' | 'refused-address' | 'proxy' | 'network';

/** No answer at all. */
export class OutboundError extends Error {
  constructor(
    readonly failure: OutboundFailure,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }
}

export interface Outbound {
  request(request: OutboundRequest): Promise<OutboundAnswer>;
  close(): Promise<void>;
}

function describe(error: unknown): { code?: string; message: string } {
  let current = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined;
  // undici wraps the socket's error; the innermost cause says what happened.
  while (current?.cause && typeof current.cause === 'object') current = current.cause as typeof current;
  const code = typeof current?.code === 'string' ? current.code : undefined;
  const message = String(current?.message ?? error).split('\n')[0].slice(0, 160);
  return { code, message };
}

/**
 * A request's handler that hands undici's abort to `connected` when undici puts the request on a
 * connection (onConnect), then every call to the handler it wraps, as that handler itself.
 * `connected` answers false when it aborted the request: undici then never writes it.
 */
class Watched implements Dispatcher.DispatchHandler {
  constructor(
    private readonly handler: Dispatcher.DispatchHandler,
    private readonly connected: (abort: (error: Error) => void) => boolean,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    // Aborted there, the request is over: the handler has had its error.
    if (this.connected(abort)) this.handler.onConnect?.(abort);
  }

  onResponseStarted(): void {
    this.handler.onResponseStarted?.();
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: Duplex): void {
    this.handler.onUpgrade?.(statusCode, headers, socket);
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    return this.handler.onHeaders?.(statusCode, headers, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    return this.handler.onData?.(chunk) ?? true;
  }

  onComplete(trailers: string[] | null): void {
    this.handler.onComplete?.(trailers);
  }

  onError(error: Error): void {
    this.handler.onError?.(error);
  }
}

export function createOutbound(options: OutboundOptions = {}): Outbound {
  const dispatchers = new Map<string, Dispatcher>();
  const tls = { ...(options.ca ? { ca: options.ca } : {}) };
  const common = {
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4000,
    ...(options.connectionsPerOrigin ? { connections: options.connectionsPerOrigin } : {}),
    ...(options.pipelining ? { pipelining: options.pipelining } : {}),
  };

  function dispatcherFor(proxy: URL | null, publicOnly: boolean): Dispatcher {
    if (options.connect) return ownConnections(options.connect);
    const key = `${proxy?.href ?? 'direct'}|${publicOnly}`;
    let dispatcher = dispatchers.get(key);
    if (!dispatcher) {
      const connect = { ...tls, ...(publicOnly ? { lookup: publicOnlyLookup } : {}) };
      // proxyTunnel false: http:// targets go to an http:// proxy in absolute form; https:// is tunnelled.
      dispatcher = proxy
        ? new ProxyAgent({ uri: proxy.href, requestTls: tls, proxyTunnel: false, factory: (origin, opts) => new Pool(origin, { ...common, ...opts }), ...common })
        : new Agent({ connect, ...common });
      dispatchers.set(key, dispatcher);
    }
    return dispatcher;
  }

  /** One dispatcher whose connections `connect` opens; undici takes each once its TLS handshake is done. */
  function ownConnections(connect: NonNullable<OutboundOptions['connect']>): Dispatcher {
    let dispatcher = dispatchers.get('own');
    if (dispatcher) return dispatcher;
    const connector: buildConnector.connector = (target, callback) => {
      const secure = target.protocol === 'https:';
      let socket: Duplex;
      try {
        socket = connect({ host: target.hostname, port: Number(target.port) || (secure ? 443 : 80), servername: target.servername || target.hostname });
      } catch (error) {
        callback(error as Error, null);
        return;
      }
      const event = socket instanceof TLSSocket ? 'secureConnect' : 'connect';
      const settle = (error: Error | null) => {
        socket.off('error', settle).off('close', closed).off(event, opened);
        if (error) callback(error, null);
        else callback(null, socket as net.Socket);
      };
      const opened = () => settle(null);
      const closed = () => settle(new Error('connection closed before it was open'));
      socket.once('error', settle).once('close', closed).once(event, opened);
    };
    dispatcher = new Agent({ connect: connector, ...common });
    dispatchers.set('own', dispatcher);
    return dispatcher;
  }

  /** Calls `connected` with the request's abort when the request is put on a connected socket. */
  function watching(dispatcher: Dispatcher, connected: (abort: (error: Error) => void) => boolean): Dispatcher {
    const dispatch: Dispatcher['dispatch'] = (options, handler) => dispatcher.dispatch(options, new Watched(handler, connected));
    return { dispatch } as Dispatcher;
  }

  async function send(spec: OutboundRequest, connected: (abort: (error: Error) => void) => boolean): Promise<OutboundAnswer> {
    const url = typeof spec.url === 'string' ? new URL(spec.url) : spec.url;
    const proxy = proxyFor(url, options.proxy ?? {});
    // A literal address never goes through `lookup`. Through a proxy, names are the proxy's to
    // resolve: a locked-down network often resolves outside names only there.
    if (spec.publicOnly && (!proxy || net.isIP(url.hostname.replace(/^\[(.*)\]$/, '$1')))) await assertPublicHost(url.hostname);
    const answer = await request(url, {
      method: spec.method ?? 'POST',
      headers: spec.headers,
      body: spec.body,
      ...(spec.pipelined ? { idempotent: true, blocking: false } : {}),
      dispatcher: watching(dispatcherFor(proxy, spec.publicOnly === true), connected),
    });
    if (spec.successWithoutBody && answer.statusCode >= 200 && answer.statusCode < 300) {
      answer.body.dump({ limit: spec.maxBodyBytes, signal: AbortSignal.timeout(spec.timeoutMs) }).catch(() => undefined);
      return { status: answer.statusCode, headers: answer.headers, body: Buffer.alloc(0), truncated: false };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    for await (const chunk of answer.body as AsyncIterable<Buffer>) {
      const room = spec.maxBodyBytes - size;
      if (chunk.length > room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        size = spec.maxBodyBytes;
        truncated = true;
        break;
      }
      chunks.push(chunk);
      size += chunk.length;
    }
    // Leaving the loop early (break) destroys the body and, with it, the connection: the rest is never read.
    if (truncated) answer.body.destroy();
    return { status: answer.statusCode, headers: answer.headers, body: Buffer.concat(chunks, size), truncated };
  }

  return {
    async request(spec) {
      let timedOut = false;
      /** undici's abort of this request on its connection (onConnect). */
      let abortRequest: ((error: Error) => void) | undefined;
      let giveUp: (reason: unknown) => void = () => undefined;
      // undici takes an abort only once the request has a connection: the deadline ends the wait
      // here at once, and a request given up before it has one is aborted as it gets one, unwritten.
      const givenUp = new Promise<never>((_, reject) => {
        giveUp = reject;
      });
      const expire = () => {
        timedOut = true;
        abortRequest?.(new Error('deadline'));
        giveUp(new Error('deadline'));
      };
      // Two deadlines of timeoutMs: one to get onto a connection, one from then for the exchange, so
      // a slow connect never cuts short an answer the peer already has (a push would be resent).
      let cancelDeadline = setDeadline(spec.timeoutMs, expire);
      let onConnection = false;
      const connected = (abort: (error: Error) => void) => {
        if (timedOut) {
          abort(new Error('deadline'));
          return false;
        }
        // A pipelined request sent again after its connection dropped comes here once more.
        abortRequest = abort;
        if (!onConnection) {
          onConnection = true;
          cancelDeadline();
          cancelDeadline = setDeadline(spec.timeoutMs, expire);
        }
        return true;
      };
      try {
        return await Promise.race([send(spec, connected), givenUp]);
      } catch (error) {
        if (timedOut) {
          const what = onConnection ? `no complete answer within ${spec.timeoutMs} ms` : `no connection within ${spec.timeoutMs} ms`;
          throw new OutboundError('timeout', what, 'ETIMEDOUT');
        }
        const { code, message } = describe(error);
        if (code === 'EADDRREFUSED') throw new OutboundError('refused-address', message, code);
        if (code === 'EPROXY' || /Proxy response|proxy/i.test(message)) throw new OutboundError('proxy', message, code);
        throw new OutboundError('network', code && !message.includes(code) ? `${code}: ${message}` : message, code);
      } finally {
        cancelDeadline();
      }
    },
    async close() {
      await Promise.all([...dispatchers.values()].map((dispatcher) => dispatcher.destroy().catch(() => undefined)));
      dispatchers.clear();
    },
  };
}
