import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import type apn from '@parse/node-apn';
import { before, connectTls, sanitizeReason, setDeadline, type TlsTarget } from '@operator/egress';

/*
 * Every place the APNs provider reaches into @parse/node-apn's internals (lib/client.js), and why.
 * None of them has a supported seam: the Provider options only configure the connection
 * (connectionRetryLimit 0 is one, and turns node-apn's retries off), the Provider emits no events,
 * and the failures it returns carry neither the Retry-After header nor, in the case below, the
 * APNs answer. node-apn-patches.spec.ts fails when the installed node-apn is not
 * NODE_APN_VERSION or when these internals have moved.
 *
 * - retryAfterHeader: Client#request reads the header as `headers['Retry-After']`, but HTTP/2
 *   header names are always lower case, so it is never found; and Client#write deletes
 *   `retryAfter` from every failure anyway. The patch wraps Client#request to note each
 *   response's `retry-after` on the failure it rejects with, as `retryAfterHeader`.
 * - retryableAnswers: Client#write passes every retryable answer (408, 429, 5xx,
 *   ExpiredProviderToken) to Client#retryRequest. With connectionRetryLimit 0 that rethrows it,
 *   unless the session is closed by then (write closes it after any 500): then it throws a new
 *   error without status or reason, and a 429 or 503 in the same batch as a 500 would read as a
 *   network error. The patch makes retryRequest rethrow the answer as it came.
 * - boundedAnswers: Client#request reads the whole answer into a string, and its only timer is
 *   requestTimeout, an idle timer on the stream: an answer that trickles a byte at a time never
 *   ends, and one of any size is read. The patch wraps Client#request to give each request one
 *   deadline for the whole exchange (waiting for the connection included) and to read at most
 *   `maxAnswerBytes`, cancelling the stream (RST_STREAM CANCEL) past either; and the failure it
 *   passes on carries none of the answer's raw text: APNs' reason is sanitised, and the error of
 *   an answer that is not JSON (whose message quotes the body) replaced.
 * - shutdownProvider: Provider#shutdown waits for `client.session.close(callback)`, and Node never
 *   calls that back for a session already destroyed (a refused or cut connection), so shutdown
 *   would never finish. It forgets such a session first, and destroys one still busy after the
 *   grace period (close waits for requests in flight).
 * - announcedStreams: Client#connect makes its HTTP/2 session and keeps it in `client.session` (a
 *   new one after the last dropped), and nothing tells when APNs' SETTINGS came: before them,
 *   session.remoteSettings may already read nghttp2's provisional 100. The patch wraps
 *   Client#connect to listen for each session's 'remoteSettings' and keep its
 *   SETTINGS_MAX_CONCURRENT_STREAMS (sessionStreams()), which the APNs provider's stream pool
 *   keeps to. And node-apn writes its requests on a new session at once, when nghttp2 still takes
 *   100 streams for allowed: APNs would refuse (REFUSED_STREAM) those past a lower limit. So
 *   Client#request is wrapped too, to wait for the session's SETTINGS (within the request's
 *   deadline, which boundedAnswers then keeps counting) before it writes. Absent, sessionStreams()
 *   stays undefined and requests go at once.
 * - shareProviderToken: each Client signs its own provider token (JWT) into `client.config.token`,
 *   an object whose regenerate() makes a new one only for the generation it was asked about. The
 *   APNs provider's further connections are given the first one's, so that every connection sends
 *   the same JWT and renews it once: Apple answers TooManyProviderTokenUpdates to tokens changed
 *   too often. Absent, each connection signs its own.
 * - proxiedConnection: Client#connect opens its session with `http2.connect(url, this.config)`,
 *   and config() keeps every Provider option it does not know, so a `createConnection` option
 *   (http2's own) opens the connection. The APNs provider passes one that goes through the
 *   operator's proxy (@operator/egress: Proxy-Authorization from the proxy URL, a refused CONNECT
 *   failing the connection). node-apn's own `proxy` option sends no credentials and takes any
 *   answer to its CONNECT as a tunnel, so a refusal reads as a TLS failure and a proxy that never
 *   answers holds every send (its connect() waits for the tunnel, outside any timer).
 *
 * When the internals are absent, each patch leaves node-apn as it is: patchNodeApn() reports it
 * as not applied; failures come back without retryAfterHeader (the queue's own backoff applies)
 * or, for the case above, as network errors; answers are bounded by node-apn's idle timer alone;
 * shutdownProvider() still resolves after the grace period. Were createConnection no longer
 * passed on, node-apn would connect directly, past the proxy: the spec fails then.
 */

/** The @parse/node-apn version these patches were written against and checked on. */
export const NODE_APN_VERSION = '8.1.0';

/** Which patches found what they patch. */
export interface NodeApnPatches {
  retryAfterHeader: boolean;
  retryableAnswers: boolean;
  boundedAnswers: boolean;
  announcedStreams: boolean;
}

/** What boundedAnswers allows one request. */
export interface AnswerLimits {
  /** The whole exchange, from Client#request's call to the answer's last byte. Default 5000 (node-apn's requestTimeout). */
  deadlineMs?: number;
  /** The most of an answer's body read (APNs' are a few dozen bytes). Default 8192. */
  maxAnswerBytes?: number;
}

/** What retryAfterHeader adds to a node-apn failure. */
export interface RetryAfterNote {
  /** The `retry-after` header of the APNs answer, as sent. */
  retryAfterHeader?: string;
}

type ResponseHeaders = Record<string, string | string[] | number | undefined>;
type Stream = {
  once(event: 'response', listener: (headers: ResponseHeaders) => void): unknown;
  on(event: 'data', listener: (chunk: string | Buffer) => void): unknown;
  close(code?: number): void;
};
type Session = { request(...args: unknown[]): Stream; destroyed?: boolean; destroy?(): void };
type Client = {
  connect?: (this: Client, ...rest: unknown[]) => unknown;
  request?: (this: Client, session: Session, ...rest: unknown[]) => Promise<unknown>;
  retryRequest?: (error: unknown, ...rest: unknown[]) => Promise<unknown>;
  session?: Session | null;
};

function clientOf(provider: apn.Provider): Client | undefined {
  const client = (provider as unknown as { client?: unknown }).client;
  return client !== null && typeof client === 'object' ? (client as Client) : undefined;
}

/**
 * Applies the send-path patches to one Provider, and says which found their internals.
 * `onSettings` is told each time APNs' SETTINGS come on one of its sessions.
 */
export function patchNodeApn(provider: apn.Provider, limits: AnswerLimits = {}, onSettings: () => void = () => undefined): NodeApnPatches {
  const client = clientOf(provider);
  return {
    retryAfterHeader: wrapRequest(client, noteRetryAfter),
    retryableAnswers: keepRetryableAnswers(client),
    boundedAnswers: wrapRequest(client, (stream, pending) => bound(stream, pending, limits)),
    announcedStreams: watchSettings(client, onSettings) && awaitSettings(client, limits),
  };
}

/** When the request being made began, for boundedAnswers' deadline: set while awaitSettings calls on. */
let requestStartedAt: number | undefined;

/** Resolves once a watched session's SETTINGS came, or with why it ended first. */
const settingsCame = new WeakMap<object, Promise<Error | null>>();

/** Wraps Client#request to write only once the session's SETTINGS came, within the request's deadline. */
function awaitSettings(client: Client | undefined, limits: AnswerLimits): boolean {
  const original = client?.request;
  if (!client || typeof original !== 'function') return false;
  const deadlineMs = limits.deadlineMs ?? 5000;
  client.request = function (this: Client, session: Session, ...rest: unknown[]) {
    const ready = session ? settingsCame.get(session) : undefined;
    if (!ready || announced.has(session)) return original.call(this, session, ...rest);
    const started = Date.now();
    return before(ready, deadlineMs, () => ({ error: new Error(`no complete answer within ${deadlineMs} ms`) })).then((ended) => {
      // Failed as node-apn fails a request whose session errs.
      if (ended) throw { error: ended };
      requestStartedAt = started;
      try {
        return original.call(this, session, ...rest);
      } finally {
        requestStartedAt = undefined;
      }
    });
  };
  return true;
}

type SettingsSession = {
  on(event: 'remoteSettings', listener: (settings: { maxConcurrentStreams?: number }) => void): unknown;
  on(event: 'close' | 'error', listener: (error?: Error) => void): unknown;
};
/** SETTINGS_MAX_CONCURRENT_STREAMS each session's server announced last. */
const announced = new WeakMap<object, number>();
const watched = new WeakSet<object>();

/** Wraps Client#connect to hear each new session's SETTINGS. The session is made before connect() settles and cannot have heard from APNs by then. */
function watchSettings(client: Client | undefined, onSettings: () => void): boolean {
  const original = client?.connect;
  if (!client || typeof original !== 'function') return false;
  const watch = () => {
    const session = client.session as unknown as SettingsSession | null | undefined;
    if (!session || typeof session.on !== 'function' || watched.has(session)) return;
    watched.add(session);
    settingsCame.set(
      session,
      new Promise<Error | null>((resolve) => {
        session.on('remoteSettings', (settings) => {
          if (typeof settings?.maxConcurrentStreams === 'number') announced.set(session, settings.maxConcurrentStreams);
          resolve(null);
          onSettings();
        });
        session.on('error', (error) => resolve(new Error(`apn write failed: ${error?.message ?? error}`)));
        session.on('close', () => resolve(new Error('apn write failed: the connection closed before APNs settings came')));
      }),
    );
  };
  client.connect = function (this: Client, ...rest: unknown[]) {
    const connecting = original.apply(this, rest);
    watch();
    return Promise.resolve(connecting).then((value) => {
      watch();
      return value;
    });
  };
  return true;
}

/**
 * Wraps Client#request so that `watch` sees the request's stream and settles in its place.
 * Client#request calls session.request() synchronously, before its first await, so swapping
 * session.request for the duration of that call sees exactly this request's stream.
 */
function wrapRequest(client: Client | undefined, watch: (stream: Stream, pending: Promise<unknown>) => Promise<unknown>): boolean {
  const original = client?.request;
  if (!client || typeof original !== 'function') return false;
  client.request = function (this: Client, session: Session, ...rest: unknown[]) {
    if (!session || typeof session.request !== 'function') return original.call(this, session, ...rest);
    let stream: Stream | undefined;
    const own = Object.prototype.hasOwnProperty.call(session, 'request');
    const request = session.request;
    session.request = function (this: unknown, ...args: unknown[]) {
      stream = request.apply(this, args);
      return stream;
    };
    let pending: Promise<unknown>;
    try {
      pending = original.call(this, session, ...rest);
    } finally {
      if (own) session.request = request;
      else delete (session as Partial<Session>).request;
    }
    return stream ? watch(stream, pending) : pending;
  };
  return true;
}

function noteRetryAfter(stream: Stream, pending: Promise<unknown>): Promise<unknown> {
  let retryAfter: string | undefined;
  stream.once('response', (headers) => {
    const value = headers['retry-after'];
    retryAfter = Array.isArray(value) ? value[0] : value === undefined ? undefined : String(value);
  });
  return pending.catch((failure: unknown) => {
    if (retryAfter !== undefined && failure !== null && typeof failure === 'object') (failure as RetryAfterNote).retryAfterHeader = retryAfter;
    throw failure;
  });
}

/** How node-apn's Client#request words the failure of an answer it could not parse (the parse error, quoting the body, follows). */
export const UNREADABLE_ANSWER = 'Unexpected error processing APNs response';

/** A node-apn failure without the answer's raw text. */
function withoutRawText(failure: unknown, status: number | undefined): unknown {
  if (failure === null || typeof failure !== 'object') return failure;
  const { response, error } = failure as { response?: { reason?: unknown }; error?: { message?: unknown } };
  if (response && typeof response === 'object' && typeof response.reason === 'string') response.reason = sanitizeReason(response.reason);
  if (typeof error?.message === 'string' && error.message.startsWith(UNREADABLE_ANSWER)) {
    (failure as { error: Error }).error = new Error(`APNs answered ${status ?? 'without a status'} with a body that is not JSON`);
  }
  return failure;
}

/** One request, settled by its deadline, its stream cancelled past it or past maxAnswerBytes. */
function bound(stream: Stream, pending: Promise<unknown>, limits: AnswerLimits): Promise<unknown> {
  const deadlineMs = limits.deadlineMs ?? 5000;
  // What awaitSettings already waited for this request counts too.
  const leftMs = Math.max(0, deadlineMs - (requestStartedAt === undefined ? 0 : Date.now() - requestStartedAt));
  const maxAnswerBytes = limits.maxAnswerBytes ?? 8192;
  let status: number | undefined;
  let apnsId: string | undefined;
  let bytes = 0;
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      cancelDeadline();
      outcome();
    };
    const cancel = (outcome: () => void) =>
      settle(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        outcome();
      });
    const cancelDeadline = setDeadline(leftMs, () => cancel(() => reject({ error: new Error(`no complete answer within ${deadlineMs} ms`) })));
    stream.once('response', (headers) => {
      status = Number(headers[':status']);
      const id = headers['apns-id'];
      apnsId = Array.isArray(id) ? id[0] : id === undefined ? undefined : String(id);
    });
    stream.on('data', (chunk) => {
      bytes += Buffer.byteLength(chunk);
      if (bytes <= maxAnswerBytes) return;
      // A 2xx is APNs' acceptance whatever follows it; anything else is judged by its status.
      if (status !== undefined && status >= 200 && status < 300) cancel(() => resolve({ 'apns-id': apnsId }));
      else cancel(() => reject({ status, error: new Error(`an answer longer than ${maxAnswerBytes} bytes`) }));
    });
    pending.then(
      (value) => settle(() => resolve(value)),
      (failure: unknown) => settle(() => reject(withoutRawText(failure, status))),
    );
  });
}

function keepRetryableAnswers(client: Client | undefined): boolean {
  if (!client || typeof client.retryRequest !== 'function') return false;
  client.retryRequest = async (answer: unknown) => {
    throw answer;
  };
  return true;
}

/** Provider#shutdown that always finishes: within graceMs, or at graceMs with the session destroyed. */
export async function shutdownProvider(provider: apn.Provider, graceMs = 6000): Promise<void> {
  const client = clientOf(provider);
  if (client?.session?.destroyed) client.session = null;
  let timer: NodeJS.Timeout | undefined;
  const givenUp = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      client?.session?.destroy?.();
      resolve();
    }, graceMs).unref();
  });
  try {
    await Promise.race([new Promise<void>((resolve) => provider.shutdown(() => resolve())), givenUp]);
  } finally {
    clearTimeout(timer);
  }
}

/** Makes `to` send the provider token (JWT) of `from`, renewed once for both; false when the internals moved. */
export function shareProviderToken(from: apn.Provider, to: apn.Provider): boolean {
  const source = (clientOf(from) as { config?: { token?: unknown } } | undefined)?.config;
  const target = (clientOf(to) as { config?: { token?: unknown } } | undefined)?.config;
  const token = source?.token as { regenerate?: unknown; current?: unknown } | null | undefined;
  if (!target || !token || typeof token.regenerate !== 'function' || typeof token.current !== 'string' || !target.token) return false;
  target.token = token;
  return true;
}

/**
 * SETTINGS_MAX_CONCURRENT_STREAMS of the provider's current HTTP/2 session, as APNs announced it
 * (heard by the announcedStreams patch); undefined while there is no session, it is gone, or its
 * SETTINGS have not come yet.
 */
export function sessionStreams(provider: apn.Provider): number | undefined {
  const session = clientOf(provider)?.session as { destroyed?: boolean } | null | undefined;
  if (!session || session.destroyed) return undefined;
  return announced.get(session);
}

/**
 * The Provider option that opens node-apn's HTTP/2 connection to `target` through `proxy` (see
 * proxiedConnection above). Every connection goes to `target`: node-apn's channel management
 * session, which would take the option too, is not used here.
 */
export function proxiedConnection(target: TlsTarget, proxy: URL, tunnelTimeoutMs?: number): { createConnection: () => Duplex } {
  return { createConnection: () => connectTls({ ...target, ALPNProtocols: ['h2'] }, proxy, tunnelTimeoutMs) };
}
