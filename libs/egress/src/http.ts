import net from 'node:net';
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici';
import { setDeadline } from './deadline';
import { assertPublicHost, publicOnlyLookup } from './guard';
import { proxyFor, type ProxySettings } from './proxy';

// Every HTTP/1.1 call this service makes to a peer it does not control (a push service, the
// wallet platform, the CRM) goes through here, with the same three rules:
// - one deadline for the whole exchange, connection to last byte (a peer that trickles a byte
//   every second does not hold a worker for longer);
// - at most `maxBodyBytes` of an answer are read, the rest is not (the connection is dropped);
// - a 3xx is an answer like any other: nothing is sent to where it points.
// Connections go through the operator's proxy (HTTPS_PROXY / HTTP_PROXY, minus NO_PROXY) and are
// kept alive per origin.

export interface OutboundOptions {
  proxy?: ProxySettings;
  /** Extra certificate authorities to trust (a local test server's); the system roots otherwise. */
  ca?: string | Buffer | (string | Buffer)[];
  /** Connections kept per origin (undici's `connections`); default unlimited. */
  connectionsPerOrigin?: number;
  /** How long an idle kept connection stays open. Default 4000 ms (undici's). */
  keepAliveTimeoutMs?: number;
}

export interface OutboundRequest {
  url: string | URL;
  method?: 'POST' | 'GET' | 'PUT';
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The whole exchange: connecting (through the proxy), sending, the answer's headers and the body read. */
  timeoutMs: number;
  /** The most of the answer's body read; the rest is dropped with the connection. */
  maxBodyBytes: number;
  /**
   * Refuse to connect to loopback, private, link-local and other non-public addresses (the name
   * is resolved and checked where the socket is opened). Through a proxy, an address given as
   * such is checked here, and names are left to the proxy.
   */
  publicOnly?: boolean;
  /**
   * A 2xx is the whole answer, its body unread: the request is done once the status comes (a push
   * service's 201 says the message is taken, whatever its body does next). The body is drained
   * apart, within the deadline and the cap, so that a well-behaved peer's connection is kept.
   */
  successWithoutBody?: boolean;
}

export interface OutboundAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** At most maxBodyBytes of the body. */
  body: Buffer;
  /** The body was longer than maxBodyBytes. */
  truncated: boolean;
}

export type OutboundFailure = 'timeout' | 'refused-address' | 'proxy' | 'network';

/** No answer: the deadline passed, the address was refused, the proxy refused, or the network failed. */
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
  /** Closes every kept connection; requests in flight fail. */
  close(): Promise<void>;
}

/** A short description of a transport failure: its code and first line, no more than 160 characters. */
function describe(error: unknown): { code?: string; message: string } {
  let current = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined;
  // undici wraps the socket's error; the innermost cause says what happened.
  while (current?.cause && typeof current.cause === 'object') current = current.cause as typeof current;
  const code = typeof current?.code === 'string' ? current.code : undefined;
  const message = String(current?.message ?? error).split('\n')[0].slice(0, 160);
  return { code, message };
}

export function createOutbound(options: OutboundOptions = {}): Outbound {
  const dispatchers = new Map<string, Dispatcher>();
  const tls = { ...(options.ca ? { ca: options.ca } : {}) };
  const common = {
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4000,
    ...(options.connectionsPerOrigin ? { connections: options.connectionsPerOrigin } : {}),
  };

  function dispatcherFor(proxy: URL | null, publicOnly: boolean): Dispatcher {
    const key = `${proxy?.href ?? 'direct'}|${publicOnly}`;
    let dispatcher = dispatchers.get(key);
    if (!dispatcher) {
      const connect = { ...tls, ...(publicOnly ? { lookup: publicOnlyLookup } : {}) };
      dispatcher = proxy ? new ProxyAgent({ uri: proxy.href, requestTls: tls, ...common }) : new Agent({ connect, ...common });
      dispatchers.set(key, dispatcher);
    }
    return dispatcher;
  }

  async function send(spec: OutboundRequest, signal: AbortSignal): Promise<OutboundAnswer> {
    const url = typeof spec.url === 'string' ? new URL(spec.url) : spec.url;
    const proxy = proxyFor(url, options.proxy ?? {});
    // A literal address never goes through `lookup`: checked here. Through a proxy, a name is the
    // proxy's to resolve (a locked-down network often resolves outside names only there), and the
    // proxy is where that network's egress rules apply.
    if (spec.publicOnly && (!proxy || net.isIP(url.hostname.replace(/^\[(.*)\]$/, '$1')))) await assertPublicHost(url.hostname);
    const answer = await request(url, {
      method: spec.method ?? 'POST',
      headers: spec.headers,
      body: spec.body,
      signal,
      dispatcher: dispatcherFor(proxy, spec.publicOnly === true),
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
      const controller = new AbortController();
      const cancelDeadline = setDeadline(spec.timeoutMs, () => controller.abort());
      try {
        return await send(spec, controller.signal);
      } catch (error) {
        if (controller.signal.aborted) throw new OutboundError('timeout', `no complete answer within ${spec.timeoutMs} ms`, 'ETIMEDOUT');
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
