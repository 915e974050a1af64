import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import type apn from '@parse/node-apn';
import { before, connectTls, sanitizeReason, setDeadline, type TlsTarget } from '@operator/egress';

/*
 * Every place the APNs provider reaches into @parse/node-apn's internals (lib/client.js), none of
 * which has a supported seam. A patch whose internals are absent is reported as not applied; the
 * spec fails when node-apn is not NODE_APN_VERSION or the internals moved.
 */

export const NODE_APN_VERSION = '8.1.0';

/** Which patches found what they patch. */
export interface NodeApnPatches {
  retryAfterHeader: boolean;
  retryableAnswers: boolean;
  boundedAnswers: boolean;
  announcedStreams: boolean;
}

export interface AnswerLimits {
  /** The whole exchange, call to last byte. Default 5000 (node-apn's requestTimeout). */
  deadlineMs?: number;
  /** Default 8192 (APNs' answers are a few dozen bytes). */
  maxAnswerBytes?: number;
}

/** What retryAfterHeader adds to a node-apn failure. */
export interface RetryAfterNote {
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

/** Patches one Provider; `onSettings` is told each time APNs' SETTINGS come on one of its sessions. */
export function patchNodeApn(provider: apn.Provider, limits: AnswerLimits = {}, onSettings: () => void = () => undefined): NodeApnPatches {
  const client = clientOf(provider);
  return {
    retryAfterHeader: wrapRequest(client, noteRetryAfter),
    retryableAnswers: keepRetryableAnswers(client),
    boundedAnswers: wrapRequest(client, (stream, pending) => bound(stream, pending, limits)),
    announcedStreams: watchSettings(client, onSettings) && awaitSettings(client, limits),
  };
}

/** Set while awaitSettings calls on, so boundedAnswers' deadline counts the wait. */
let requestStartedAt: number | undefined;

/** Resolves once a watched session's SETTINGS came, or with why it ended first. */
const settingsCame = new WeakMap<object, Promise<Error | null>>();

/**
 * announcedStreams: node-apn writes on a new session at once, while nghttp2 still assumes 100
 * streams and APNs refuses those past a lower limit; so a request waits for the SETTINGS.
 */
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
const announced = new WeakMap<object, number>();
const watched = new WeakSet<object>();

/** announcedStreams: wraps Client#connect to hear each session's SETTINGS, which node-apn does not expose. */
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
 * Lets `watch` see a request's stream and settle in its place. Client#request calls
 * session.request() before its first await, so a swap for that call sees exactly this stream.
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

/** retryAfterHeader: node-apn looks for `Retry-After` (HTTP/2 names are lower case) and drops it anyway. */
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

/** How node-apn words an answer it could not parse; the parse error that follows quotes the body. */
export const UNREADABLE_ANSWER = 'Unexpected error processing APNs response';

function withoutRawText(failure: unknown, status: number | undefined): unknown {
  if (failure === null || typeof failure !== 'object') return failure;
  const { response, error } = failure as { response?: { reason?: unknown }; error?: { message?: unknown } };
  if (response && typeof response === 'object' && typeof response.reason === 'string') response.reason = sanitizeReason(response.reason);
  if (typeof error?.message === 'string' && error.message.startsWith(UNREADABLE_ANSWER)) {
    (failure as { error: Error }).error = new Error(`APNs answered ${status ?? 'without a status'} with a body that is not JSON`);
  }
  return failure;
}

/**
 * boundedAnswers: node-apn has only an idle timer and reads answers whole, so a request gets one
 * deadline and at most maxAnswerBytes; its failure carries none of the answer's raw text.
 */
function bound(stream: Stream, pending: Promise<unknown>, limits: AnswerLimits): Promise<unknown> {
  const deadlineMs = limits.deadlineMs ?? 5000;
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

/**
 * retryableAnswers: once a 500 has closed the session, node-apn's retryRequest throws a new error
 * without status, so a 429 or 503 in the same batch would read as a network error. Rethrow as is.
 */
function keepRetryableAnswers(client: Client | undefined): boolean {
  if (!client || typeof client.retryRequest !== 'function') return false;
  client.retryRequest = async (answer: unknown) => {
    throw answer;
  };
  return true;
}

/**
 * Provider#shutdown that always finishes: Node never calls session.close() back for a destroyed
 * session, so one is forgotten first; one still busy is destroyed at graceMs.
 */
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

/**
 * Makes `to` send the provider token (JWT) of `from`, renewed once for both: Apple answers
 * TooManyProviderTokenUpdates to tokens changed too often. False when the internals moved.
 */
export function shareProviderToken(from: apn.Provider, to: apn.Provider): boolean {
  const source = (clientOf(from) as { config?: { token?: unknown } } | undefined)?.config;
  const target = (clientOf(to) as { config?: { token?: unknown } } | undefined)?.config;
  const token = source?.token as { regenerate?: unknown; current?: unknown } | null | undefined;
  if (!target || !token || typeof token.regenerate !== 'function' || typeof token.current !== 'string' || !target.token) return false;
  target.token = token;
  return true;
}

/** The current session's announced SETTINGS_MAX_CONCURRENT_STREAMS; undefined until they came. */
export function sessionStreams(provider: apn.Provider): number | undefined {
  const session = clientOf(provider)?.session as { destroyed?: boolean } | null | undefined;
  if (!session || session.destroyed) return undefined;
  return announced.get(session);
}

/**
 * Connects through `proxy` by an option node-apn passes on to http2.connect: its own `proxy` option
 * sends no credentials, takes any answer to CONNECT as a tunnel and has no deadline.
 */
export function proxiedConnection(target: TlsTarget, proxy: URL, tunnelTimeoutMs?: number): { createConnection: () => Duplex } {
  return { createConnection: () => connectTls({ ...target, ALPNProtocols: ['h2'] }, proxy, tunnelTimeoutMs) };
}
