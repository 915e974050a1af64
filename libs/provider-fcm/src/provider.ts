import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { Credential, GoogleOAuthAccessToken } from 'firebase-admin/app';
import { before, connectTls, proxyFor, sanitizeReason, setDeadline, type ProxySettings } from '@operator/egress';
import { parseRetryAfter } from '@operator/config';
import { createStreamPool, inFlightLimit, sendError, streamsAllowed, type ErrorScope, type StreamLease, type StreamPool, type Notification, type PushProvider, type SendError, type SendResult, type SendTarget } from '@operator/providers';
import { fcmWireMessage, toFcmMessage } from './message';

// Firebase Cloud Messaging through its HTTP v1 API over node:http2: one POST
// /v1/projects/{project_id}/messages:send per device, each a stream on a TLS connection the
// provider keeps, one result per target.
//
// firebase-admin 13 still gives the messages their types (toFcmMessage) and the error codes
// fcmSendError() classifies by, but no longer carries the sends:
// - Its default HTTP/1.1 transport makes one request per message over a keep-alive agent; the
//   client work around each one (URL parsing, a deep copy of every message, agent bookkeeping,
//   one socket write each) was most of the worker's CPU.
// - Its HTTP/2 transport opens a session to the hard-coded fcm.googleapis.com for each sendEach
//   call and closes it afterwards: no kept connection, and no way to FCM_ENDPOINT.
// - Its errors carried only a code and a message (firebase/firebase-admin-node#43, #2604); here
//   the HTTP status, Retry-After and FCM's error details are read from the answer itself.
//
// How sends go:
// - Connections go to Google's hosts, or all to FCM_ENDPOINT's origin with Google's names kept
//   (googleConnector()), through the operator's proxy (a CONNECT tunnel) when one applies to where
//   they go; a test's agent may open them instead. The HTTP/2 ones ask for h2 by ALPN and are
//   kept until the server closes them, sends GOAWAY or they fail. Each carries as many streams as
//   its server announces in SETTINGS_MAX_CONCURRENT_STREAMS (FCM: 100); a further connection is
//   opened only when every open one is full, up to `maxConnections` (PUSH_PROVIDER_CONNECTIONS);
//   past that a send waits for a stream to free up, before its deadline starts (see
//   @operator/providers' stream pool). So the sends on the wire follow what FCM allows: at most
//   maxConnections x its streams per connection.
// - `concurrency` (PUSH_PROVIDER_CONCURRENCY), when given, caps the sends in flight across the
//   provider (every send() call together) below that; the others wait their turn.
// - A send not answered within 15 s (firebase-admin's timeout; `timeoutMs`) is cancelled: `network`.
//   The deadline is the whole send, its retries included: waiting for the access token, for a
//   connection (a tunnel, a TLS handshake) and for the last byte of the answer; not the wait for
//   a free stream, which is the other sends' answers.
// - At most MAX_ANSWER_BYTES of an answer are read; past that the stream is cancelled and the
//   answer classified by its status. What FCM said is kept as its status, its error codes and a
//   sanitised message, never as raw text.
// - `sdkRetry` is the retry firebase-admin made, capped: by default one immediate retry of a send
//   answered 503 (one whose Retry-After asks for more than a second comes back at once as
//   `unavailable` with retryAfterMs) or whose connection went down before any answer, which is
//   what a kept connection the server had dropped looks like. 429 and 500 are never retried
//   here, nor a connection that could not be opened: those are results at once, and the queue
//   retries them later instead of holding a worker.
// - The access token comes from serviceAccountCredential() below, over the provider's https agent
//   (HTTP/1.1, on the same connector); it is kept and renewed 5 minutes before it expires
//   (firebase-admin's margin), with one token request shared by every send waiting for it.

export interface FcmServiceAccount {
  project_id: string;
  client_email: string;
  private_key: string;
}

/** The provider's retry of a send (HTTP 503, a connection lost before any answer); `false`: none. */
export interface FcmSdkRetry {
  /** Retries after the first attempt. Default 1. */
  maxRetries?: number;
  /** Longest wait before a retry (back-off or Retry-After); a 503 asking for longer is not retried. Default 1000. */
  maxDelayMs?: number;
}

export interface FcmProviderOptions {
  serviceAccount: FcmServiceAccount;
  /**
   * An agent that opens every connection itself (a test's): the OAuth2 token requests go through
   * it, and the HTTP/2 connections to FCM are opened with its createConnection(). `endpoint`, `ca`
   * and `proxy` are then not used. Default: the provider's own keep-alive agent.
   */
  httpAgent?: https.Agent;
  /**
   * An https origin (`https://host[:port]`) that takes every connection instead of Google's hosts
   * (FCM_ENDPOINT: a proxy, a local test server); see googleConnector().
   */
  endpoint?: string;
  /** Extra certificate authorities to trust (a local server's test CA); the system roots otherwise. */
  ca?: string | Buffer | (string | Buffer)[];
  /** The operator's proxy (HTTPS_PROXY, NO_PROXY), applied to where each connection goes: Google's host, or `endpoint`. */
  proxy?: ProxySettings;
  /** How many sends are in flight at once, across every send() call of the provider; default: as many as the connections take. */
  concurrency?: number;
  /** HTTP/2 connections opened at most, each carrying as many streams as FCM allows (default 8). */
  maxConnections?: number;
  /** Retries of a send (see above). Default `{ maxRetries: 1, maxDelayMs: 1000 }`. */
  sdkRetry?: FcmSdkRetry | false;
  /**
   * How long one send may take, from waiting for the access token to the answer's last byte,
   * before it is cancelled as `network` (default 15000, firebase-admin's).
   */
  timeoutMs?: number;
}

/** What the HTTP response of a failed send said, beyond the error code and message. */
export interface FcmResponseFacts {
  status: number;
  retryAfter?: string;
  /** google.firebase.fcm.v1.FcmError errorCode, e.g. UNREGISTERED. */
  fcmErrorCode?: string;
  /** Google's status, e.g. INVALID_ARGUMENT. */
  googleStatus?: string;
  /** Fields named by google.rpc.BadRequest fieldViolations, e.g. message.token. */
  fields: string[];
  /** google.rpc.ErrorInfo: why (RATE_LIMIT_EXCEEDED), whose rule (googleapis.com), and its metadata (quota_limit, quota_unit, consumer). */
  errorInfo?: { reason?: string; domain?: string; metadata: Record<string, string> };
  /** google.rpc.QuotaFailure violations: what the quota check failed on (subject) and how (description). */
  quotaViolations?: { subject?: string; description?: string }[];
}

/** Why the OAuth2 access token could not be had (the token endpoint's answer or the network error). */
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

/** Classifies one failed send, by its firebase-admin error code, into the provider taxonomy. */
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
      return sendError('rate-limited', message, retryAfterMs, quotaScope(code, facts, text));
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

// Whose quota a 429 of the send API is about. What this rests on:
// - FCM's ErrorCode reference: QUOTA_EXCEEDED (429) is "sending limit exceeded for the message
//   target", with "an extension of type google.rpc.QuotaFailure ... to specify which quota was
//   exceeded": the project's message rate, one device's message rate, or one topic's.
// - A project over its per-minute send quota, as answered to firebase/firebase-admin-go#719: status
//   RESOURCE_EXHAUSTED with no FcmError, a google.rpc.ErrorInfo { reason RATE_LIMIT_EXCEEDED,
//   domain googleapis.com, metadata { quota_limit SendsPerMinutePerProject, quota_unit
//   1/min/{project}, consumer projects/..., service fcm.googleapis.com } }, and the message "Quota
//   exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service
//   'fcm.googleapis.com' for consumer 'project_number:...'" (Service Control's words for a
//   consumer's quota).
// - No sample of the device-rate answer is published. A QuotaFailure violation names its subject
//   ("project:...", "clientip:..." in google.rpc.QuotaFailure's own docs), so one naming a device or
//   a registration token is taken as that device's rate.
// So: a violation about the device says `device`; one about the project, an ErrorInfo of Google's
// quota system for the project, or Service Control's "for consumer 'project..." says `credential`.
// An answer that says neither (a bare QUOTA_EXCEEDED, an overloaded front end's 429) is taken as
// `device`, the safer of the two: taken wrongly for the credential it would stop every player of
// the brand for up to PUSH_RETRY_AFTER_MAX_MS on one device's account (and a device that keeps
// drawing 429s would keep its brand paused), which is the outage scoping exists to prevent; taken
// wrongly for one device, the other sends go on and FCM refuses each with a 429 of its own (429s
// do not count against the project's quota; each of those deliveries backs off in turn), and the
// first answer that does name the project pauses the credential.
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';
const QUOTA_FAILURE_TYPE = 'type.googleapis.com/google.rpc.QuotaFailure';
/** google.api.ErrorReason values of Google's quota system, which counts quota per consumer (the project). */
const PROJECT_QUOTA_REASONS = new Set(['RATE_LIMIT_EXCEEDED', 'RESOURCE_QUOTA_EXCEEDED']);
const ABOUT_DEVICE = /device|registration[ _-]?token/i;
const ABOUT_PROJECT = /project/i;
const CONSUMER_QUOTA = /for consumer '?project/i;

function quotaScope(code: string, facts: FcmResponseFacts | undefined, text: string): ErrorScope {
  if (code === 'messaging/device-message-rate-exceeded') return 'device';
  const violations = (facts?.quotaViolations ?? []).map((violation) => `${violation.subject ?? ''} ${violation.description ?? ''}`);
  if (violations.some((violation) => ABOUT_DEVICE.test(violation))) return 'device';
  if (violations.some((violation) => ABOUT_PROJECT.test(violation))) return 'credential';
  const info = facts?.errorInfo;
  const perProject = info && (/\{project\}/.test(info.metadata.quota_unit ?? '') || /PerProject/i.test(info.metadata.quota_limit ?? ''));
  if (perProject || (info?.domain === 'googleapis.com' && PROJECT_QUOTA_REASONS.has(info.reason ?? ''))) return 'credential';
  if (CONSUMER_QUOTA.test(text)) return 'credential';
  return 'device';
}

/**
 * The token endpoint refused us (auth), was busy (transient), or was not reached (network). Its 429
 * is about the credential: every send with it waits for the same token.
 */
function credentialError(message: string, failure: CredentialFailure | null): SendError {
  if (!failure) return sendError('auth', message);
  if (failure.status === undefined) return failure.code ? sendError('network', message) : sendError('auth', message);
  if (failure.status === 429) return sendError('rate-limited', message, parseRetryAfter(failure.retryAfter), 'credential');
  if (failure.status >= 500 || failure.status === 408) return sendError('unavailable', message, parseRetryAfter(failure.retryAfter));
  return sendError('auth', message);
}

const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';

/** FCM's error codes (the FcmError errorCode, else Google's status) under firebase-admin 13's names. */
export const FCM_ERROR_CODES: Record<string, string> = {
  UNREGISTERED: 'messaging/registration-token-not-registered',
  NOT_FOUND: 'messaging/registration-token-not-registered',
  INVALID_ARGUMENT: 'messaging/invalid-argument',
  SENDER_ID_MISMATCH: 'messaging/mismatched-credential',
  PERMISSION_DENIED: 'messaging/mismatched-credential',
  QUOTA_EXCEEDED: 'messaging/message-rate-exceeded',
  RESOURCE_EXHAUSTED: 'messaging/message-rate-exceeded',
  THIRD_PARTY_AUTH_ERROR: 'messaging/third-party-auth-error',
  APNS_AUTH_ERROR: 'messaging/third-party-auth-error',
  UNAUTHENTICATED: 'messaging/third-party-auth-error',
  UNAVAILABLE: 'messaging/server-unavailable',
  INTERNAL: 'messaging/internal-error',
};

/** An answer that is not Google's JSON error, by its status (as firebase-admin read it). */
export const STATUS_ERROR_CODES: Record<number, string> = {
  400: 'messaging/invalid-argument',
  401: 'messaging/authentication-error',
  403: 'messaging/authentication-error',
  500: 'messaging/internal-error',
  503: 'messaging/server-unavailable',
};

type GoogleErrorDetail = {
  '@type'?: string;
  errorCode?: string;
  fieldViolations?: { field?: string }[];
  reason?: string;
  domain?: string;
  metadata?: Record<string, unknown>;
  violations?: { subject?: unknown; description?: unknown }[];
};
type GoogleErrorBody = { error?: { message?: string; status?: string; details?: GoogleErrorDetail[] } };

const asString = (value: unknown) => (typeof value === 'string' ? value : undefined);

/** What the quota details of Google's answer say (see quotaScope()): kept as strings, the rest dropped. */
function readQuotaDetail(detail: GoogleErrorDetail, facts: FcmResponseFacts) {
  if (detail['@type'] === ERROR_INFO_TYPE) {
    const metadata = detail.metadata && typeof detail.metadata === 'object' ? detail.metadata : {};
    const strings = Object.entries(metadata).filter((entry): entry is [string, string] => typeof entry[1] === 'string');
    facts.errorInfo = { reason: asString(detail.reason), domain: asString(detail.domain), metadata: Object.fromEntries(strings) };
  }
  if (detail['@type'] === QUOTA_FAILURE_TYPE && Array.isArray(detail.violations)) {
    const violations = detail.violations.filter((violation) => violation && typeof violation === 'object');
    facts.quotaViolations = [...(facts.quotaViolations ?? []), ...violations.map((v) => ({ subject: asString(v.subject), description: asString(v.description) }))];
  }
}

/** An error with a code fcmSendError() knows, carrying the facts of the HTTP answer when there was one. */
function fcmError(code: string, message: string, facts?: FcmResponseFacts): Error {
  const error = Object.assign(new Error(message), { code });
  if (facts) Object.defineProperty(error, RESPONSE_FACTS, { value: facts });
  return error;
}

/** Google's error messages run to 160 characters (a quota's names the consumer at its end). */
const MAX_GOOGLE_MESSAGE = 240;

/** An error code as Google writes them (UNREGISTERED, INVALID_ARGUMENT); anything else is not kept. */
function googleCode(value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(value) ? value : undefined;
}

/**
 * A send FCM answered with something other than 200, as the error firebase-admin would have made of
 * it. Its message is Google's error message sanitised, never the body's raw text (a proxy's page).
 */
export function fcmAnswerError(status: number, retryAfter: string | undefined, text: string): Error {
  let body: GoogleErrorBody | undefined;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page), or cut at MAX_ANSWER_BYTES: classified by status.
  }
  const error = body && typeof body === 'object' && body.error && typeof body.error === 'object' ? body.error : undefined;
  const facts: FcmResponseFacts = { status, retryAfter, fields: [] };
  facts.googleStatus = googleCode(error?.status);
  for (const detail of Array.isArray(error?.details) ? error.details : []) {
    if (!detail || typeof detail !== 'object') continue;
    readQuotaDetail(detail, facts);
    if (detail['@type'] === FCM_ERROR_TYPE && typeof detail.errorCode === 'string') facts.fcmErrorCode = detail.errorCode;
    for (const violation of Array.isArray(detail?.fieldViolations) ? detail.fieldViolations : []) {
      if (typeof violation?.field === 'string') facts.fields.push(violation.field);
    }
  }
  facts.fcmErrorCode = googleCode(facts.fcmErrorCode);
  if (!error) return fcmError(STATUS_ERROR_CODES[status] ?? 'messaging/unknown-error', "an answer that is not Google's JSON error", facts);
  const serverCode = facts.fcmErrorCode ?? facts.googleStatus;
  const said = typeof error.message === 'string' ? sanitizeReason(error.message, MAX_GOOGLE_MESSAGE) : '';
  return fcmError((serverCode && FCM_ERROR_CODES[serverCode]) || 'messaging/unknown-error', said || 'an error without a message', facts);
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

/**
 * One POST of a form, over `agent`, with a deadline on the whole exchange (connecting through a
 * tunnel, the answer's last byte) and at most MAX_ANSWER_BYTES of the answer read.
 */
function postForm(url: string, form: URLSearchParams, agent: https.Agent): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const body = form.toString();
    const req = https.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body), accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const answered = () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks, size).toString('utf8') });
        };
        res.on('data', (chunk: Buffer) => {
          const room = MAX_ANSWER_BYTES - size;
          chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
          size += Math.min(room, chunk.length);
          if (chunk.length <= room) return;
          // The rest is not read: the connection goes, and the answer is judged on what came.
          res.destroy();
          answered();
        });
        res.on('end', answered);
        res.on('error', failed);
      },
    );
    const timer = setTimeout(() => req.destroy(Object.assign(new Error(`no answer to the token request within ${TOKEN_TIMEOUT_MS} ms`), { code: 'ETIMEDOUT' })), TOKEN_TIMEOUT_MS);
    function failed(error: Error) {
      clearTimeout(timer);
      reject(error);
    }
    req.on('error', failed);
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
      // Described below by the status alone.
    }
    if (answer.status === 200 && typeof json.access_token === 'string' && typeof json.expires_in === 'number') {
      return { access_token: json.access_token, expires_in: json.expires_in };
    }
    const said =
      typeof json.error === 'string'
        ? sanitizeReason(`${json.error}${typeof json.error_description === 'string' ? `: ${json.error_description}` : ''}`)
        : "an answer that is not Google's JSON error";
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

/** Opens a TLS connection for requests naming `host`, one of Google's (fcm.googleapis.com, oauth2.googleapis.com). */
type GoogleConnect = (host: string, options: Pick<tls.ConnectionOptions, 'ALPNProtocols' | 'session'>) => Duplex;

/**
 * Connections to the Google host a request names, or every one to `endpoint` (FCM_ENDPOINT)
 * whatever host it names, keeping that host as the TLS server name (and the request's Host header
 * or `:authority`): the server there must hold a certificate for Google's names that this process
 * trusts (the system store, NODE_EXTRA_CA_CERTS, or `ca`). A connection goes through the operator's
 * proxy (a CONNECT tunnel) when one applies to where it goes: Google's host, or the endpoint.
 */
function googleConnector(options: { endpoint?: string; ca?: FcmProviderOptions['ca']; proxy?: ProxySettings; tunnelTimeoutMs: number }): GoogleConnect {
  const endpoint = options.endpoint === undefined ? null : new URL(options.endpoint);
  if (endpoint && endpoint.protocol !== 'https:') throw new Error(`FCM endpoint ${options.endpoint} must be an https origin`);
  return (host, extra) => {
    const to = endpoint ?? new URL(`https://${host}`);
    const target = { ...extra, host: to.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(to.port || 443), servername: host, ca: options.ca };
    return connectTls(target, proxyFor(to, options.proxy ?? {}), options.tunnelTimeoutMs);
  };
}

/** A keep-alive agent whose connections `connect` opens (the token requests'). */
class GoogleAgent extends https.Agent {
  constructor(private readonly connect: GoogleConnect) {
    super({ keepAlive: true });
  }

  // Like https.Agent's own createConnection, the socket is returned (the agent attaches it).
  override createConnection(options: https.RequestOptions): Duplex {
    const { servername, session } = options as tls.ConnectionOptions;
    return this.connect(servername || String(options.hostname ?? options.host), { session });
  }
}

/** Connections opened by a test's agent, the agent's own options (ca, ...) given as https.request would. */
function agentConnector(agent: https.Agent): GoogleConnect {
  return (host, extra) => {
    const socket = agent.createConnection({ ...agent.options, ...extra, host, port: 443, servername: host } as https.RequestOptions);
    if (!socket) throw new Error('the FCM agent did not return a connection');
    return socket;
  };
}

const FCM_HOST = 'fcm.googleapis.com';
/** firebase-admin's timeout for one send. */
const DEFAULT_TIMEOUT_MS = 15_000;
/** Connections one provider opens at most when each carries as many streams as its server allows. */
export const DEFAULT_MAX_CONNECTIONS = 8;
/** firebase-admin renewed its access token this long before it expired. */
const TOKEN_RENEWAL_MS = 5 * 60_000;
/** The most of an answer read (FCM's and the token endpoint's are well under 2 KiB); the rest is dropped. */
const MAX_ANSWER_BYTES = 8192;

/** FCM's answer to one send. */
interface FcmAnswer {
  status: number;
  retryAfter: string | undefined;
  text: string;
}

/**
 * A send that got no complete answer. `unanswered`: the connection had been open and went down
 * before any answer came (what a kept connection the server had dropped looks like); such a send
 * may be sent again, as firebase-admin did on ECONNRESET.
 */
class FcmTransportError extends Error {
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
  /** The TLS socket under the session. */
  socket: Duplex;
  /** SETTINGS_MAX_CONCURRENT_STREAMS of the server's latest SETTINGS; undefined until they come. */
  maxStreams: number | undefined;
  connected: boolean;
  /** Takes no new streams (GOAWAY, an error, close()); the socket goes once its streams are done. */
  draining: boolean;
  /** The session's 'close' came. */
  ended: boolean;
  /**
   * Resolves when the server's first SETTINGS came (or the connection ended): until then the pool
   * counts 100 streams on it, and its requests wait for them before they are written.
   */
  settings: Promise<void>;
  failure: Error | null;
}

/** HTTP/2 connections to FCM, opened with `connect` as the stream pool needs them (see the notes at the top). */
function fcmConnections(connect: () => Duplex, maxConnections: number) {
  const pool: StreamPool<FcmConnection> = createStreamPool<FcmConnection>({
    maxConnections,
    open,
    streams: (connection) => streamsAllowed(connection.maxStreams),
    settled: (connection) => connection.maxStreams !== undefined,
    takesStreams: (connection) => !connection.draining,
    // Once node has let go of a session that was closed gracefully, it ends the socket and waits for
    // the peer to close it, but no longer reads it, so the peer's close may never be seen; the
    // socket is destroyed here when its last stream is done.
    retired: (connection) => connection.socket.destroy(),
  });

  function drain(connection: FcmConnection) {
    if (connection.draining) return;
    connection.draining = true;
    pool.wake();
  }

  function open(): FcmConnection {
    let socket: Duplex | undefined;
    const session = http2.connect(`https://${FCM_HOST}`, { createConnection: () => (socket = connect()) });
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

  /** Why a send on `connection` got no answer; `answered`: the status had come. */
  function lost(connection: FcmConnection, answered: boolean, detail: string): FcmTransportError {
    const cause = connection.failure?.message ?? detail;
    if (!connection.connected) return new FcmTransportError(`could not connect to FCM: ${cause}`, 'app/network-error', false);
    if (!answered) return new FcmTransportError(`FCM connection lost before the answer (ECONNRESET): ${cause}`, 'app/network-error', true);
    return new FcmTransportError(`FCM connection lost during the answer: ${cause}`, 'app/network-error', false);
  }

  /** One request on a connection whose SETTINGS have come; settles at the latest when its stream closes. */
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
    // A stream cut before its answer ends too, without a status.
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

  /**
   * One send on a leased stream, answered or given up by `deadline` (a Date.now() time);
   * `timeoutMs` only names it in the error. The caller releases the lease once this settles.
   */
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
      // The deadline covers opening the connection too (a tunnel the proxy has not opened yet, a
      // server that never answers the TLS handshake): until the server's SETTINGS have come, a send
      // waits here, its timer running.
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

/** The credential's access token, kept until 5 minutes before it expires; waiting sends share one request. */
function accessTokens(credential: Credential): () => Promise<string> {
  let token: { value: string; renewAt: number } | null = null;
  let pending: Promise<string> | null = null;
  return () => {
    if (token && Date.now() < token.renewAt) return Promise.resolve(token.value);
    pending ??= credential
      .getAccessToken()
      .then((granted) => {
        token = { value: granted.access_token, renewAt: Date.now() + granted.expires_in * 1000 - TOKEN_RENEWAL_MS };
        return token.value;
      })
      .finally(() => {
        pending = null;
      });
    return pending;
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function messageName(text: string): string | null {
  try {
    const name = (JSON.parse(text) as { name?: unknown }).name;
    return typeof name === 'string' ? name : null;
  } catch {
    return null;
  }
}

export function createFcmProvider(options: FcmProviderOptions): PushProvider {
  const { serviceAccount } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connect = options.httpAgent
    ? agentConnector(options.httpAgent)
    : googleConnector({ endpoint: options.endpoint, ca: options.ca, proxy: options.proxy, tunnelTimeoutMs: timeoutMs });
  const ownAgent = options.httpAgent ? null : new GoogleAgent(connect);
  const agent = options.httpAgent ?? (ownAgent as https.Agent);
  const retry = options.sdkRetry ?? {};
  const maxRetries = retry === false ? 0 : Math.max(0, Math.floor(retry.maxRetries ?? 1));
  const maxDelayMs = retry === false ? 0 : Math.max(0, retry.maxDelayMs ?? 1000);
  const limit = inFlightLimit(options.concurrency);

  const credential = serviceAccountCredential(serviceAccount, agent);
  const accessToken = accessTokens(credential);
  const connections = fcmConnections(() => {
    const socket = connect(FCM_HOST, { ALPNProtocols: ['h2'] });
    // Small frames go out at once rather than waiting on Nagle's algorithm.
    if (socket instanceof net.Socket) socket.setNoDelay(true);
    return socket;
  }, options.maxConnections ?? DEFAULT_MAX_CONNECTIONS);
  const path = `/v1/projects/${encodeURIComponent(serviceAccount.project_id)}/messages:send`;
  let closed: Promise<void> | null = null;

  /** How long to wait before sending a 503'd message again (firebase-admin's rule), or undefined: not again. */
  const retryDelay = (answer: FcmAnswer, retries: number): number | undefined => {
    if (answer.status !== 503 || retries >= maxRetries) return undefined;
    const asked = parseRetryAfter(answer.retryAfter);
    const delay = asked || (retries === 0 ? 0 : 500 * 2 ** retries);
    return delay > maxDelayMs ? (asked ? undefined : maxDelayMs) : delay;
  };

  /** One attempt: the answer, or the result to give up with. The wait for a stream moves the deadline back by as long. */
  async function attempt(body: string, deadline: { at: number }): Promise<FcmAnswer | SendResult | FcmTransportError> {
    let bearer: string;
    try {
      // The token request goes on for the other sends waiting on it; this one stops at its deadline.
      bearer = await before(accessToken(), deadline.at - Date.now(), () => new FcmTransportError(`no access token within ${timeoutMs} ms`, 'app/network-timeout', false));
    } catch (error) {
      if (error instanceof FcmTransportError) return { ok: false, error: fcmSendError(error) };
      const failure = error instanceof GoogleTokenError ? error.failure : credential.lastFailure;
      return { ok: false, error: fcmSendError(fcmError('app/invalid-credential', `Failed to obtain an access token: ${(error as Error).message}`), failure) };
    }
    // Waiting for a stream is waiting for other sends to be answered, not for FCM: not counted.
    const waiting = Date.now();
    const stream = await connections.lease();
    deadline.at += Date.now() - waiting;
    try {
      return await connections.request(
        stream,
        { ':method': 'POST', ':authority': FCM_HOST, ':path': path, authorization: `Bearer ${bearer}`, 'content-type': 'application/json; charset=UTF-8' },
        body,
        deadline.at,
        timeoutMs,
      );
    } catch (error) {
      if (error instanceof FcmTransportError) return error;
      return { ok: false, error: fcmSendError(error) };
    } finally {
      stream.release();
    }
  }

  async function sendOne(body: string): Promise<SendResult> {
    // One deadline for the whole send, its retries included.
    const deadline = { at: Date.now() + timeoutMs };
    for (let retries = 0; ; retries += 1) {
      const outcome = await attempt(body, deadline);
      if (outcome instanceof FcmTransportError) {
        if (outcome.unanswered && retries < maxRetries && Date.now() < deadline.at) continue;
        return { ok: false, error: fcmSendError(outcome) };
      }
      if ('ok' in outcome) return outcome;
      if (outcome.status === 200) return { ok: true, providerMessageId: messageName(outcome.text) };
      const delay = retryDelay(outcome, retries);
      if (delay === undefined || Date.now() + delay >= deadline.at) return { ok: false, error: fcmSendError(fcmAnswerError(outcome.status, outcome.retryAfter, outcome.text)) };
      if (delay > 0) await sleep(delay);
    }
  }

  return {
    name: 'fcm',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('FCM provider is closed');
      // One message for the notification; each device's body only adds its token.
      const message = fcmWireMessage(toFcmMessage(notification, ''));
      return Promise.all(
        targets.map((target): SendResult | Promise<SendResult> => {
          const token = target.token?.trim();
          // An empty token never reaches FCM: it would refuse the message as a payload error.
          if (!token) return { ok: false, error: sendError('invalid-token', 'empty FCM registration token') };
          return limit(() => sendOne(JSON.stringify({ message: { ...message, token } })));
        }),
      );
    },

    close(): Promise<void> {
      closed ??= connections.close().finally(() => ownAgent?.destroy());
      return closed;
    },
  };
}
