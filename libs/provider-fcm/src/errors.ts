import { parseRetryAfter } from '@operator/config';
import { sanitizeReason } from '@operator/egress';
import { sendError, type ErrorCode, type ErrorScope, type SendError } from '@operator/providers';

// Google's answers to a send, read once into facts (fcmAnswerError) and classified once
// (fcmSendError). Errors keep firebase-admin 13's names (messaging/...), so the messages and
// whatever reads them speak its vocabulary; firebase-admin-codes.spec.ts holds them to it.

export interface FcmResponseFacts {
  status: number;
  retryAfter?: string;
  /** google.firebase.fcm.v1.FcmError errorCode (UNREGISTERED). */
  fcmErrorCode?: string;
  /** Google's status (INVALID_ARGUMENT). */
  googleStatus?: string;
  /** Named by google.rpc.BadRequest fieldViolations (message.token). */
  fields: string[];
  /** google.rpc.ErrorInfo. */
  errorInfo?: { reason?: string; domain?: string; metadata: Record<string, string> };
  /** google.rpc.QuotaFailure violations. */
  quotaViolations?: { subject?: string; description?: string }[];
}

/** Why the OAuth2 access token could not be had. */
export interface CredentialFailure {
  status?: number;
  code?: string;
  retryAfter?: string | null;
  message: string;
}

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

/** An answer that is not Google's JSON error, by its status, as firebase-admin read it. */
export const STATUS_ERROR_CODES: Record<number, string> = {
  400: 'messaging/invalid-argument',
  401: 'messaging/authentication-error',
  403: 'messaging/authentication-error',
  500: 'messaging/internal-error',
  503: 'messaging/server-unavailable',
};

const RESPONSE_FACTS = Symbol.for('operator.fcm.responseFacts');
const NODE_ERROR = /^E[A-Z_]+$|^UND_ERR|^ERR_TLS|^ERR_SSL/;

/** The provider's code for a firebase-admin error code, before what the answer adds. */
function codeOf(code: string): ErrorCode {
  switch (code) {
    case 'messaging/registration-token-not-registered':
      return 'unregistered';
    case 'messaging/invalid-registration-token':
      return 'invalid-token';
    case 'messaging/payload-size-limit-exceeded':
      return 'payload-too-large';
    case 'messaging/invalid-argument':
    case 'messaging/invalid-payload':
    case 'messaging/invalid-data-payload-key':
    case 'messaging/invalid-options':
    case 'messaging/invalid-package-name':
    case 'messaging/invalid-recipient':
      return 'payload-invalid';
    case 'messaging/message-rate-exceeded':
    case 'messaging/quota-exceeded':
    case 'messaging/device-message-rate-exceeded':
    case 'messaging/topics-message-rate-exceeded':
      return 'rate-limited';
    case 'messaging/server-unavailable':
    case 'messaging/internal-error':
    case 'messaging/unknown-error':
      return 'unavailable';
    case 'messaging/authentication-error':
    case 'messaging/third-party-auth-error':
    case 'messaging/mismatched-credential':
    case 'app/invalid-credential':
      return 'auth';
    case 'app/network-error':
    case 'app/network-timeout':
      return 'network';
    default:
      // A bare Node error (ECONNREFUSED...) is the network; anything else unknown is taken as transient.
      return NODE_ERROR.test(code) ? 'network' : 'unavailable';
  }
}

/** What each of Google's error codes means for a send, before the answer's facts refine it. */
export const errorTaxonomy: Record<string, ErrorCode> = Object.fromEntries(Object.entries(FCM_ERROR_CODES).map(([google, name]) => [google, codeOf(name)]));

const TOKEN_FIELD = /^message\.token$/;
const ABOUT_TOKEN = /registration[ -]?token/i;
const TOO_BIG = /too (big|large)|size limit/i;

/** Classifies one failed send by its error code and the facts of FCM's answer. */
export function fcmSendError(error: unknown, credentialFailure: CredentialFailure | null = null): SendError {
  const err = (error ?? {}) as { code?: unknown; message?: unknown; [RESPONSE_FACTS]?: FcmResponseFacts };
  const code = typeof err.code === 'string' ? err.code : 'unknown';
  const facts = err[RESPONSE_FACTS];
  const text = typeof err.message === 'string' && err.message ? err.message : String(error);
  const serverCode = facts?.fcmErrorCode ?? facts?.googleStatus;
  const message = facts ? `${code} (HTTP ${facts.status}${serverCode ? ` ${serverCode}` : ''}): ${text}` : `${code}: ${text}`;
  const retryAfterMs = parseRetryAfter(facts?.retryAfter);

  if (code === 'app/invalid-credential') return credentialError(message, credentialFailure);
  if (code === 'messaging/invalid-argument') {
    // FCM names the offending field when it can (google.rpc.BadRequest); otherwise its words tell.
    if (facts?.fields.length ? facts.fields.some((field) => TOKEN_FIELD.test(field)) : ABOUT_TOKEN.test(text)) return sendError('invalid-token', message);
    return sendError(TOO_BIG.test(text) ? 'payload-too-large' : 'payload-invalid', message);
  }
  const classified = codeOf(code);
  if (classified === 'rate-limited') return sendError('rate-limited', message, retryAfterMs, quotaScope(code, facts, text));
  if (classified === 'unavailable') return sendError('unavailable', message, retryAfterMs);
  return sendError(classified, message);
}

const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';
const QUOTA_FAILURE_TYPE = 'type.googleapis.com/google.rpc.QuotaFailure';
/** Reasons of Google's quota system, which counts quota per consumer (the project). */
const PROJECT_QUOTA_REASONS = new Set(['RATE_LIMIT_EXCEEDED', 'RESOURCE_QUOTA_EXCEEDED']);
const ABOUT_DEVICE = /device|registration[ _-]?token/i;
const ABOUT_PROJECT = /project/i;
const CONSUMER_QUOTA = /for consumer '?project/i;

/**
 * Whose quota a 429 is about: `credential` only when the answer names the project. Taken wrongly for
 * the credential, one device would pause its whole brand; wrongly for a device, the next answer
 * that names the project pauses it.
 */
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

/** The token endpoint's 429 holds the whole credential. */
function credentialError(message: string, failure: CredentialFailure | null): SendError {
  if (!failure) return sendError('auth', message);
  if (failure.status === undefined) return failure.code ? sendError('network', message) : sendError('auth', message);
  if (failure.status === 429) return sendError('rate-limited', message, parseRetryAfter(failure.retryAfter), 'credential');
  if (failure.status >= 500 || failure.status === 408) return sendError('unavailable', message, parseRetryAfter(failure.retryAfter));
  return sendError('auth', message);
}

/** An error with a code fcmSendError() knows, and the facts of the answer when there was one. */
export function fcmError(code: string, message: string, facts?: FcmResponseFacts): Error {
  const error = Object.assign(new Error(message), { code });
  if (facts) Object.defineProperty(error, RESPONSE_FACTS, { value: facts });
  return error;
}

const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
/** Google's error messages run to 160 characters (a quota's names the consumer at its end). */
const MAX_GOOGLE_MESSAGE = 240;

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

/** Anything not written as Google writes codes is not kept. */
function googleCode(value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(value) ? value : undefined;
}

function readDetail(detail: GoogleErrorDetail, facts: FcmResponseFacts) {
  if (detail['@type'] === FCM_ERROR_TYPE && typeof detail.errorCode === 'string') facts.fcmErrorCode = detail.errorCode;
  for (const violation of Array.isArray(detail.fieldViolations) ? detail.fieldViolations : []) {
    if (typeof violation?.field === 'string') facts.fields.push(violation.field);
  }
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

/** A non-200 answer as firebase-admin's error; its message is Google's sanitised, never the body's raw text. */
export function fcmAnswerError(status: number, retryAfter: string | undefined, text: string): Error {
  let body: GoogleErrorBody | undefined;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page), or cut at the answer cap: classified by status.
  }
  const error = body && typeof body === 'object' && body.error && typeof body.error === 'object' ? body.error : undefined;
  const facts: FcmResponseFacts = { status, retryAfter, fields: [] };
  facts.googleStatus = googleCode(error?.status);
  for (const detail of Array.isArray(error?.details) ? error.details : []) {
    if (detail && typeof detail === 'object') readDetail(detail, facts);
  }
  facts.fcmErrorCode = googleCode(facts.fcmErrorCode);
  if (!error) return fcmError(STATUS_ERROR_CODES[status] ?? 'messaging/unknown-error', "an answer that is not Google's JSON error", facts);
  const serverCode = facts.fcmErrorCode ?? facts.googleStatus;
  const said = typeof error.message === 'string' ? sanitizeReason(error.message, MAX_GOOGLE_MESSAGE) : '';
  return fcmError((serverCode && FCM_ERROR_CODES[serverCode]) || 'messaging/unknown-error', said || 'an error without a message', facts);
}
