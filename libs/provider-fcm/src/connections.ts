import http2, { type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import type https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type tls from 'node:tls';
import { connectTls, proxyFor, setDeadline, type ProxySettings } from '@operator/egress';
import { createStreamPool, streamsAllowed, type StreamLease, type StreamPool } from '@operator/providers';

// Where the provider's connections go, and its HTTP/2 connections to FCM: kept until the server
// closes them or sends GOAWAY, each carrying as many streams as its server allows.

export const FCM_HOST = 'fcm.googleapis.com';
/** FCM's answers are well under 2 KiB; past this the stream is cancelled. */
const MAX_ANSWER_BYTES = 8192;

/** Opens a TLS connection for requests naming one of Google's hosts. */
export type GoogleConnect = (host: string, options: Pick<tls.ConnectionOptions, 'ALPNProtocols'>) => Duplex;

/**
 * Connections to the Google host named, or all to `endpoint` under Google's names (its server must
 * hold a certificate for them), through the proxy that applies to where each goes.
 */
export function googleConnector(options: { endpoint?: string; ca?: string | Buffer | (string | Buffer)[]; proxy?: ProxySettings; tunnelTimeoutMs: number }): GoogleConnect {
  const endpoint = options.endpoint === undefined ? null : new URL(options.endpoint);
  if (endpoint && endpoint.protocol !== 'https:') throw new Error(`FCM endpoint ${options.endpoint} must be an https origin`);
  return (host, extra) => {
    const to = endpoint ?? new URL(`https://${host}`);
    const target = { ...extra, host: to.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(to.port || 443), servername: host, ca: options.ca };
    return connectTls(target, proxyFor(to, options.proxy ?? {}), options.tunnelTimeoutMs);
  };
}

/** Connections opened by a test's agent, with the agent's own options as https.request would give them. */
export function agentConnector(agent: https.Agent): GoogleConnect {
  return (host, extra) => {
    const socket = agent.createConnection({ ...agent.options, ...extra, host, port: 443, servername: host } as https.RequestOptions);
    if (!socket) throw new Error('the FCM agent did not return a connection');
    return socket;
  };
}

export interface FcmAnswer {
  status: number;
  retryAfter: string | undefined;
  text: string;
}

/**
 * A send that got no complete answer. `unanswered`: an open connection went down before any answer
 * (a kept connection the server had dropped); such a send may go again, as firebase-admin did.
 */
export class FcmTransportError extends Error {
  constructor(
    message: string,
    readonly code: 'app/network-error' | 'app/network-timeout',
    readonly unanswered: boolean,
  ) {
    super(message);
    this.name = 'FcmTransportError';
  }
}

interface FcmConnection {
  session: ClientHttp2Session;
  socket: Duplex;
  /** From the server's latest SETTINGS; undefined until they come. */
  maxStreams: number | undefined;
  connected: boolean;
  /** Takes no new streams; the socket goes once its streams are done. */
  draining: boolean;
  ended: boolean;
  /** Until the first SETTINGS the pool counts 100 streams, and requests wait before they are written. */
  settings: Promise<void>;
  failure: Error | null;
}

export function fcmConnections(connect: GoogleConnect, maxConnections: number) {
  const pool: StreamPool<FcmConnection> = createStreamPool<FcmConnection>({
    maxConnections,
    open,
    streams: (connection) => streamsAllowed(connection.maxStreams),
    settled: (connection) => connection.maxStreams !== undefined,
    takesStreams: (connection) => !connection.draining,
    // Node ends a gracefully closed session's socket but no longer reads it, so the peer's close may
    // never be seen: destroyed when its last stream is done.
    retired: (connection) => connection.socket.destroy(),
  });

  function drain(connection: FcmConnection) {
    if (connection.draining) return;
    connection.draining = true;
    pool.wake();
  }

  function open(): FcmConnection {
    let socket: Duplex | undefined;
    const session = http2.connect(`https://${FCM_HOST}`, {
      createConnection: () => {
        socket = connect(FCM_HOST, { ALPNProtocols: ['h2'] });
        if (socket instanceof net.Socket) socket.setNoDelay(true);
        return socket;
      },
    });
    const connection: FcmConnection = { session, socket: socket as Duplex, maxStreams: undefined, connected: false, draining: false, ended: false, settings: Promise.resolve(), failure: null };
    connection.settings = new Promise<void>((resolve) => {
      session.once('remoteSettings', () => resolve());
      session.once('close', () => resolve());
    });
    session.on('remoteSettings', (settings) => {
      connection.maxStreams = settings.maxConcurrentStreams;
      pool.wake();
    });
    session.on('connect', () => {
      connection.connected = true;
      // A server that did not pick h2 would read our frames as a broken HTTP/1.1 request.
      if (session.alpnProtocol !== 'h2') session.destroy(new Error(`the FCM server did not agree to HTTP/2 (ALPN: ${session.alpnProtocol || 'none'})`));
    });
    session.on('error', (error: Error) => {
      connection.failure = error;
      drain(connection);
    });
    session.on('goaway', () => drain(connection));
    session.on('close', () => {
      connection.ended = true;
      drain(connection);
    });
    // An idle connection does not keep the process alive; a send in flight has its timer.
    session.unref();
    return connection;
  }

  function lost(connection: FcmConnection, answered: boolean, detail: string): FcmTransportError {
    const cause = connection.failure?.message ?? detail;
    if (!connection.connected) return new FcmTransportError(`could not connect to FCM: ${cause}`, 'app/network-error', false);
    if (!answered) return new FcmTransportError(`FCM connection lost before the answer (ECONNRESET): ${cause}`, 'app/network-error', true);
    return new FcmTransportError(`FCM connection lost during the answer: ${cause}`, 'app/network-error', false);
  }

  /** Settles at the latest when its stream closes. */
  function exchange(connection: FcmConnection, headers: OutgoingHttpHeaders, body: string, settle: (answer: FcmAnswer | FcmTransportError) => void) {
    let stream: ClientHttp2Stream;
    try {
      stream = connection.session.request(headers);
    } catch (error) {
      settle(lost(connection, false, (error as Error).message));
      return undefined;
    }
    let status = 0;
    let retryAfter: string | undefined;
    let streamError: Error | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    stream.on('response', (answer) => {
      status = Number(answer[':status']);
      const header = answer['retry-after'];
      retryAfter = Array.isArray(header) ? header[0] : header;
    });
    stream.on('data', (chunk: Buffer) => {
      if (ended) return;
      const room = MAX_ANSWER_BYTES - size;
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      size += Math.min(room, chunk.length);
      if (chunk.length <= room) return;
      // The rest is not read: the stream is cancelled, and the answer judged by its status.
      ended = true;
      settle({ status, retryAfter, text: Buffer.concat(chunks, size).toString('utf8') });
      stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('end', () => {
      if (!status || ended) return;
      ended = true;
      settle({ status, retryAfter, text: Buffer.concat(chunks, size).toString('utf8') });
    });
    stream.on('error', (error: Error) => {
      streamError = error;
    });
    // After 'end' for an answered send; otherwise the stream was reset or its connection lost.
    stream.on('close', () => {
      if (!ended) settle(lost(connection, status !== 0, streamError?.message ?? `stream closed (HTTP/2 code ${stream.rstCode})`));
    });
    stream.end(body);
    return stream;
  }

  /** One send on a leased stream, given up at `deadline`; the caller releases the lease once it settles. */
  function request(lease: StreamLease<FcmConnection>, headers: OutgoingHttpHeaders, body: string, deadline: number, timeoutMs: number): Promise<FcmAnswer> {
    const { connection } = lease;
    return new Promise<FcmAnswer>((resolve, reject) => {
      let stream: ClientHttp2Stream | undefined;
      let settled = false;
      const settle = (outcome: FcmAnswer | FcmTransportError) => {
        if (settled) return;
        settled = true;
        cancelDeadline();
        if (outcome instanceof FcmTransportError) reject(outcome);
        else resolve(outcome);
      };
      // The deadline covers opening the connection too: until the SETTINGS come, a send waits here.
      const cancelDeadline = setDeadline(deadline - Date.now(), () => {
        settle(new FcmTransportError(`no answer from FCM within ${timeoutMs} ms`, 'app/network-timeout', false));
        stream?.close(http2.constants.NGHTTP2_CANCEL);
      });
      void connection.settings.then(() => {
        if (!settled) stream = exchange(connection, headers, body, settle);
      });
    });
  }

  function close(): Promise<void> {
    const closing = pool.all().map((connection) => {
      const closed = new Promise<void>((resolve) => (connection.ended ? resolve() : connection.session.once('close', resolve)));
      connection.session.close();
      drain(connection);
      return closed;
    });
    return Promise.all(closing).then(() => undefined);
  }

  return { lease: () => pool.lease(), request, close };
}

