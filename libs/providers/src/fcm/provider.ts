import { createPrivateKey, randomUUID, sign, type KeyObject } from 'node:crypto';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { deleteApp, initializeApp, type App, type Credential, type GoogleOAuthAccessToken } from 'firebase-admin/app';
import { getMessaging, type Messaging, type SendResponse } from 'firebase-admin/messaging';
import { parseRetryAfter, sendError, type Notification, type PushProvider, type SendError, type SendResult, type SendTarget } from '../types';
import { toFcmMessage, type TokenMessage } from './message';

// Firebase Cloud Messaging through firebase-admin 13: one App per provider, sendEach over the
// HTTP/1.1 transport (so the App's httpAgent carries every request), one result per target.
//
// What firebase-admin does on its own, and what this provider changes:
// - It retries a send on HTTP 503 and on ECONNRESET/ETIMEDOUT, by default up to 4 times with
//   0.5 s x 2^n back-off (0, 1, 2, 4 s) or the Retry-After of a 503 when it is at most 60 s. It
//   never retries 429 or 500. A worker held for up to a minute is worse than handing the push back
//   to our queue, so `sdkRetry` caps this (default: one immediate retry, which still covers a
//   keep-alive socket the server had closed; a 503 asking for more than a second comes back as
//   `unavailable` with retryAfterMs). The cap is applied to firebase-admin's internal HTTP client;
//   if a later version moves it, its own defaults apply again.
// - Its errors carry only a code and a message: the HTTP status, the Retry-After header and the
//   FCM error details are dropped (firebase/firebase-admin-node#43, #2604). This provider reads them
//   from the HTTP response just before firebase-admin discards it (an internal hook, feature-
//   detected: without it results still classify by code, only retryAfterMs is missing).
// - Its request timeout is fixed at 15 s per send.
// - Its `cert(serviceAccount, httpAgent)` credential does not work here: with a service account
//   given as an object, firebase-admin 13 drops the agent before google-auth-library 10 makes the
//   token request (firebase/firebase-admin-node#2960), so it goes straight to
//   oauth2.googleapis.com, past any proxy or test server; and google-auth-library's gaxios 7 loads
//   node-fetch with a dynamic import(), which Jest refuses without --experimental-vm-modules.
//   `serviceAccountCredential()` below makes the same OAuth2 JWT-bearer grant (RS256 assertion,
//   aud https://oauth2.googleapis.com/token) over the provider's agent; firebase-admin still caches
//   the token and refreshes it 5 minutes before it expires.
// - A failure to get the access token surfaces as `app/invalid-credential` whatever the cause; the
//   credential remembers the cause, so a refusal by Google (auth) is told apart from a token
//   server that was busy (transient) or not reached at all (network).

export interface FcmServiceAccount {
  project_id: string;
  client_email: string;
  private_key: string;
}

/** firebase-admin's own retry of a send (HTTP 503, ECONNRESET); `false`: none. */
export interface FcmSdkRetry {
  /** Retries after the first attempt. Default 1. */
  maxRetries?: number;
  /** Longest wait before a retry (back-off or Retry-After); a 503 asking for longer is not retried. Default 1000. */
  maxDelayMs?: number;
}

export interface FcmProviderOptions {
  serviceAccount: FcmServiceAccount;
  /** Prefix of the firebase-admin App name (made unique per provider). */
  appName?: string;
  /** Agent for every request (FCM and the OAuth2 token). Default: a keep-alive agent of this provider, 100 sockets. */
  httpAgent?: https.Agent;
  /**
   * An https origin (`https://host[:port]`) that takes every connection of the default agent instead
   * of Google's hosts (FCM_ENDPOINT: a proxy, a local test server); see fcmEndpointAgent().
   */
  endpoint?: string;
  /** How many sends are in flight at once: the size of each sendEach call (1-500, default 500). */
  concurrency?: number;
  /** firebase-admin's own retries (see above). Default `{ maxRetries: 1, maxDelayMs: 1000 }`. */
  sdkRetry?: FcmSdkRetry | false;
}

/** FCM's limit for one sendEach call. */
export const FCM_MAX_BATCH = 500;

/** What the HTTP response of a failed send said, beyond firebase-admin's code and message. */
export interface FcmResponseFacts {
  status: number;
  retryAfter?: string;
  /** google.firebase.fcm.v1.FcmError errorCode, e.g. UNREGISTERED. */
  fcmErrorCode?: string;
  /** Google's status, e.g. INVALID_ARGUMENT. */
  googleStatus?: string;
  /** Fields named by google.rpc.BadRequest fieldViolations, e.g. message.token. */
  fields: string[];
}

/** Why the OAuth2 access token could not be had (the error google-auth-library threw). */
export interface CredentialFailure {
  status?: number;
  code?: string;
  retryAfter?: string | null;
  message: string;
}

const RESPONSE_FACTS = Symbol.for('operator.fcm.responseFacts');

const TOKEN_FIELD = /^message\.token$/;
const ABOUT_TOKEN = /registration[ -]?token/i;
const TOO_BIG = /too (big|large)|size limit/i;

/** Classifies one firebase-admin error (by its code) into the provider taxonomy. */
export function fcmSendError(error: unknown, credentialFailure: CredentialFailure | null = null): SendError {
  const err = (error ?? {}) as { code?: unknown; message?: unknown; [RESPONSE_FACTS]?: FcmResponseFacts };
  const code = typeof err.code === 'string' ? err.code : 'unknown';
  const facts = err[RESPONSE_FACTS];
  const text = typeof err.message === 'string' && err.message ? err.message : String(error);
  const message = facts
    ? `${code} (HTTP ${facts.status}${facts.fcmErrorCode ?? facts.googleStatus ? ` ${facts.fcmErrorCode ?? facts.googleStatus}` : ''}): ${text}`
    : `${code}: ${text}`;
  const retryAfterMs = parseRetryAfter(facts?.retryAfter);

  switch (code) {
    case 'messaging/registration-token-not-registered':
      return sendError('unregistered', message);
    case 'messaging/invalid-registration-token':
      return sendError('invalid-token', message);
    case 'messaging/invalid-argument':
      // FCM names the offending field when it can (google.rpc.BadRequest); otherwise its words tell.
      if (facts?.fields.length ? facts.fields.some((field) => TOKEN_FIELD.test(field)) : ABOUT_TOKEN.test(text)) return sendError('invalid-token', message);
      return sendError(TOO_BIG.test(text) ? 'payload-too-large' : 'payload-invalid', message);
    case 'messaging/payload-size-limit-exceeded':
      return sendError('payload-too-large', message);
    case 'messaging/invalid-payload':
    case 'messaging/invalid-data-payload-key':
    case 'messaging/invalid-options':
    case 'messaging/invalid-package-name':
    case 'messaging/invalid-recipient':
      return sendError('payload-invalid', message);
    case 'messaging/message-rate-exceeded':
    case 'messaging/quota-exceeded':
    case 'messaging/device-message-rate-exceeded':
    case 'messaging/topics-message-rate-exceeded':
      return sendError('rate-limited', message, retryAfterMs);
    case 'messaging/server-unavailable':
    case 'messaging/internal-error':
    case 'messaging/unknown-error':
      return sendError('unavailable', message, retryAfterMs);
    case 'messaging/authentication-error':
    case 'messaging/third-party-auth-error':
    case 'messaging/mismatched-credential':
      return sendError('auth', message);
    case 'app/invalid-credential':
      return credentialError(message, credentialFailure);
    case 'app/network-error':
    case 'app/network-timeout':
      return sendError('network', message);
    default:
      // A bare Node error (ECONNREFUSED...) is a network failure; anything unknown is treated as transient.
      if (/^E[A-Z_]+$/.test(code) || code.startsWith('UND_ERR') || code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL')) return sendError('network', message);
      return sendError('unavailable', message, retryAfterMs);
  }
}

/** The token endpoint refused us (auth), was busy (transient), or was not reached (network). */
function credentialError(message: string, failure: CredentialFailure | null): SendError {
  if (!failure) return sendError('auth', message);
  if (failure.status === undefined) return failure.code ? sendError('network', message) : sendError('auth', message);
  if (failure.status === 429) return sendError('rate-limited', message, parseRetryAfter(failure.retryAfter));
  if (failure.status >= 500 || failure.status === 408) return sendError('unavailable', message, parseRetryAfter(failure.retryAfter));
  return sendError('auth', message);
}

export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
const FCM_SCOPES = ['https://www.googleapis.com/auth/firebase.messaging', 'https://www.googleapis.com/auth/cloud-platform'];
const TOKEN_TIMEOUT_MS = 10_000;

/** A token request that failed: Google's answer (status, error, Retry-After) or the network error code. */
export class GoogleTokenError extends Error {
  constructor(
    message: string,
    readonly failure: CredentialFailure,
  ) {
    super(message);
    this.name = 'GoogleTokenError';
  }
}

export interface ServiceAccountCredential extends Credential {
  /** Why the last token request failed; null once one succeeds. */
  readonly lastFailure: CredentialFailure | null;
}

function postForm(url: string, form: URLSearchParams, agent: https.Agent): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const body = form.toString();
    const req = https.request(
      url,
      {
        method: 'POST',
        agent,
        timeout: TOKEN_TIMEOUT_MS,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body), accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(Object.assign(new Error(`token request timed out after ${TOKEN_TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Google's OAuth2 JWT-bearer grant for a service account (what firebase-admin's cert() does), over
 * the given agent. Throws GoogleTokenError; one immediate retry when a kept-alive socket was reset.
 */
export function serviceAccountCredential(serviceAccount: FcmServiceAccount, agent: https.Agent, tokenUrl = GOOGLE_TOKEN_URL): ServiceAccountCredential {
  let key: KeyObject;
  try {
    key = createPrivateKey(serviceAccount.private_key);
  } catch (error) {
    throw new Error(`FCM service account ${serviceAccount.client_email}: unreadable private_key (${(error as Error).message})`);
  }
  let lastFailure: CredentialFailure | null = null;

  const assertion = () => {
    const iat = Math.floor(Date.now() / 1000);
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode({ iss: serviceAccount.client_email, scope: FCM_SCOPES.join(' '), aud: tokenUrl, iat, exp: iat + 3600 })}`;
    return `${unsigned}.${sign('RSA-SHA256', Buffer.from(unsigned), key).toString('base64url')}`;
  };

  async function request(retried: boolean): Promise<GoogleOAuthAccessToken> {
    const form = new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion() });
    let answer: Awaited<ReturnType<typeof postForm>>;
    try {
      answer = await postForm(tokenUrl, form, agent);
    } catch (error) {
      const code = typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'ENETWORK';
      if (code === 'ECONNRESET' && !retried) return request(true);
      throw new GoogleTokenError(`token request failed: ${(error as Error).message}`, { code, message: (error as Error).message });
    }
    let json: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {};
    try {
      json = JSON.parse(answer.text);
    } catch {
      // Described below from the status and the raw text.
    }
    if (answer.status === 200 && typeof json.access_token === 'string' && typeof json.expires_in === 'number') {
      return { access_token: json.access_token, expires_in: json.expires_in };
    }
    const said = typeof json.error === 'string' ? `${json.error}${typeof json.error_description === 'string' ? `: ${json.error_description}` : ''}` : answer.text.slice(0, 200);
    const retryAfter = answer.headers['retry-after'];
    throw new GoogleTokenError(`token request answered ${answer.status}: ${said}`, {
      status: answer.status === 200 ? 502 : answer.status,
      retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
      message: said,
    });
  }

  return {
    get lastFailure() {
      return lastFailure;
    },
    async getAccessToken() {
      try {
        const token = await request(false);
        lastFailure = null;
        return token;
      } catch (error) {
        lastFailure = error instanceof GoogleTokenError ? error.failure : { message: String(error) };
        throw error;
      }
    },
  };
}

interface InternalResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  isJson(): boolean;
  data: unknown;
}

function responseFacts(response: InternalResponse): FcmResponseFacts {
  const retryAfter = response.headers?.['retry-after'];
  const facts: FcmResponseFacts = { status: response.status, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, fields: [] };
  const body = (response.isJson() ? response.data : undefined) as
    | { error?: { status?: string; details?: { '@type'?: string; errorCode?: string; fieldViolations?: { field?: string }[] }[] } }
    | undefined;
  const details = Array.isArray(body?.error?.details) ? body.error.details : [];
  facts.googleStatus = typeof body?.error?.status === 'string' ? body.error.status : undefined;
  for (const detail of details) {
    if (detail?.['@type'] === 'type.googleapis.com/google.firebase.fcm.v1.FcmError' && typeof detail.errorCode === 'string') facts.fcmErrorCode = detail.errorCode;
    for (const violation of detail?.fieldViolations ?? []) if (typeof violation?.field === 'string') facts.fields.push(violation.field);
  }
  return facts;
}

/**
 * Reaches into firebase-admin 13's request handler (not public API, feature-detected) to keep the
 * HTTP facts of failed sends and to cap its own retries. Answers what could be done.
 */
function instrument(messaging: Messaging, retry: FcmSdkRetry | false): { responseFacts: boolean; retry: boolean } {
  const handler = (messaging as unknown as { messagingRequestHandler?: Record<string, unknown> }).messagingRequestHandler;
  const done = { responseFacts: false, retry: false };
  if (!handler) return done;
  const build = handler.buildSendResponseFromError;
  if (typeof build === 'function') {
    handler.buildSendResponseFromError = function (this: unknown, err: { response?: InternalResponse }) {
      const result = build.call(this, err) as SendResponse;
      const response = err?.response;
      if (result?.error && response && typeof response.status === 'number' && typeof response.isJson === 'function') {
        try {
          Object.defineProperty(result.error, RESPONSE_FACTS, { value: responseFacts(response) });
        } catch {
          // Facts are a bonus: the code alone still classifies the error.
        }
      }
      return result;
    };
    done.responseFacts = true;
  }
  const client = handler.httpClient as { retry?: unknown } | undefined;
  if (client && 'retry' in client) {
    client.retry =
      retry === false
        ? null
        : {
            maxRetries: Math.max(0, Math.floor(retry.maxRetries ?? 1)),
            statusCodes: [503],
            ioErrorCodes: ['ECONNRESET'],
            backOffFactor: 0.5,
            maxDelayInMillis: Math.max(0, retry.maxDelayMs ?? 1000),
          };
    done.retry = true;
  }
  return done;
}

/**
 * An agent that connects every request to `origin` whatever host its URL names, keeping that host
 * as the TLS server name and Host header: requests still name fcm.googleapis.com and
 * oauth2.googleapis.com, so the server there must hold a certificate for those names that this
 * process trusts (the system store, NODE_EXTRA_CA_CERTS, or `ca` in the options).
 */
export function fcmEndpointAgent(origin: string, options: https.AgentOptions = {}): https.Agent {
  const url = new URL(origin);
  if (url.protocol !== 'https:') throw new Error(`FCM endpoint ${origin} must be an https origin`);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(url.port || 443);
  class EndpointAgent extends https.Agent {
    // Like https.Agent's own createConnection, the socket is returned (the agent attaches it).
    override createConnection(connection: https.RequestOptions): Duplex {
      const { servername, ca, rejectUnauthorized, session } = connection as tls.ConnectionOptions;
      return tls.connect({ host, port, servername: servername || connection.hostname || connection.host || undefined, ca, rejectUnauthorized, session });
    }
  }
  return new EndpointAgent(options);
}

export function createFcmProvider(options: FcmProviderOptions): PushProvider {
  const { serviceAccount } = options;
  const agentOptions: https.AgentOptions = { keepAlive: true, maxSockets: 100 };
  const ownAgent = options.httpAgent ? null : options.endpoint ? fcmEndpointAgent(options.endpoint, agentOptions) : new https.Agent(agentOptions);
  const httpAgent = options.httpAgent ?? (ownAgent as https.Agent);
  const batchSize = Math.min(FCM_MAX_BATCH, Math.max(1, Math.floor(options.concurrency ?? FCM_MAX_BATCH)));

  const credential = serviceAccountCredential(serviceAccount, httpAgent);

  const app: App = initializeApp(
    { credential, projectId: serviceAccount.project_id, httpAgent },
    `${options.appName ?? 'operator-fcm'}-${randomUUID()}`,
  );
  const messaging = getMessaging(app);
  messaging.enableLegacyHttpTransport();
  instrument(messaging, options.sdkRetry ?? {});
  let closed: Promise<void> | null = null;

  const toResult = (response: SendResponse | undefined): SendResult => {
    if (response?.success) return { ok: true, providerMessageId: response.messageId ?? null };
    return { ok: false, error: fcmSendError(response?.error ?? new Error('no response from firebase-admin'), credential.lastFailure) };
  };

  async function sendBatch(messages: TokenMessage[]): Promise<SendResult[]> {
    try {
      const batch = await messaging.sendEach(messages);
      return messages.map((_, index) => toResult(batch.responses[index]));
    } catch (error) {
      // sendEach itself failed (e.g. the App was deleted): every message gets that error.
      const failure = fcmSendError(error, credential.lastFailure);
      return messages.map(() => ({ ok: false, error: failure }));
    }
  }

  return {
    name: 'fcm',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('FCM provider is closed');
      const results: SendResult[] = new Array(targets.length);
      // An empty token never reaches FCM: firebase-admin would refuse the whole message as a payload error.
      // One message built once; sendEach deep-copies each before firebase-admin renames its fields.
      const message = toFcmMessage(notification, '');
      const pending: { index: number; message: TokenMessage }[] = [];
      targets.forEach((target, index) => {
        const token = target.token?.trim();
        if (!token) results[index] = { ok: false, error: sendError('invalid-token', 'empty FCM registration token') };
        else pending.push({ index, message: { ...message, token } });
      });
      for (let start = 0; start < pending.length; start += batchSize) {
        const chunk = pending.slice(start, start + batchSize);
        const chunkResults = await sendBatch(chunk.map((item) => item.message));
        chunk.forEach((item, position) => {
          results[item.index] = chunkResults[position];
        });
      }
      return results;
    },

    close(): Promise<void> {
      closed ??= deleteApp(app).finally(() => ownAgent?.destroy());
      return closed;
    },
  };
}
