import type apn from '@parse/node-apn';

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
 * - shutdownProvider: Provider#shutdown waits for `client.session.close(callback)`, and Node never
 *   calls that back for a session already destroyed (a refused or cut connection), so shutdown
 *   would never finish. It forgets such a session first, and destroys one still busy after the
 *   grace period (close waits for requests in flight).
 *
 * When the internals are absent, each patch leaves node-apn as it is: patchNodeApn() reports it
 * as not applied, failures come back without retryAfterHeader (the queue's own backoff applies)
 * or, for the case above, as network errors; shutdownProvider() still resolves after the grace
 * period.
 */

/** The @parse/node-apn version these patches were written against and checked on. */
export const NODE_APN_VERSION = '8.1.0';

/** Which patches found what they patch. */
export interface NodeApnPatches {
  retryAfterHeader: boolean;
  retryableAnswers: boolean;
}

/** What retryAfterHeader adds to a node-apn failure. */
export interface RetryAfterNote {
  /** The `retry-after` header of the APNs answer, as sent. */
  retryAfterHeader?: string;
}

type ResponseHeaders = Record<string, string | string[] | undefined>;
type Stream = { once(event: 'response', listener: (headers: ResponseHeaders) => void): unknown };
type Session = { request(...args: unknown[]): Stream; destroyed?: boolean; destroy?(): void };
type Client = {
  request?: (this: Client, session: Session, ...rest: unknown[]) => Promise<unknown>;
  retryRequest?: (error: unknown, ...rest: unknown[]) => Promise<unknown>;
  session?: Session | null;
};

function clientOf(provider: apn.Provider): Client | undefined {
  const client = (provider as unknown as { client?: unknown }).client;
  return client !== null && typeof client === 'object' ? (client as Client) : undefined;
}

/** Applies the send-path patches to one Provider, and says which found their internals. */
export function patchNodeApn(provider: apn.Provider): NodeApnPatches {
  const client = clientOf(provider);
  return { retryAfterHeader: tapRetryAfter(client), retryableAnswers: keepRetryableAnswers(client) };
}

/**
 * Client#request calls session.request() synchronously, before its first await, so swapping
 * session.request for the duration of that call sees exactly this request's stream.
 */
function tapRetryAfter(client: Client | undefined): boolean {
  const original = client?.request;
  if (!client || typeof original !== 'function') return false;
  client.request = function (this: Client, session: Session, ...rest: unknown[]) {
    if (!session || typeof session.request !== 'function') return original.call(this, session, ...rest);
    let retryAfter: string | undefined;
    const own = Object.prototype.hasOwnProperty.call(session, 'request');
    const request = session.request;
    session.request = function (this: unknown, ...args: unknown[]) {
      const stream = request.apply(this, args);
      stream.once('response', (headers) => {
        const value = headers['retry-after'];
        retryAfter = Array.isArray(value) ? value[0] : value;
      });
      return stream;
    };
    let pending: Promise<unknown>;
    try {
      pending = original.call(this, session, ...rest);
    } finally {
      if (own) session.request = request;
      else delete (session as Partial<Session>).request;
    }
    return pending.catch((failure: unknown) => {
      if (retryAfter !== undefined && failure !== null && typeof failure === 'object') (failure as RetryAfterNote).retryAfterHeader = retryAfter;
      throw failure;
    });
  };
  return true;
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
