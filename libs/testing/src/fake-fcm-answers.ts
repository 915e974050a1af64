import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';

// What the fake FCM answers: Google's error bodies, the scripted answers tests choose from, and how
// an answer is written over HTTP/1.1 or HTTP/2.

const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const BAD_REQUEST_TYPE = 'type.googleapis.com/google.rpc.BadRequest';
const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';
const QUOTA_FAILURE_TYPE = 'type.googleapis.com/google.rpc.QuotaFailure';
const HELP_TYPE = 'type.googleapis.com/google.rpc.Help';

const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
};

/** A scripted answer to one send. `body` defaults to `{name}` for 2xx. */
export interface FcmAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Cut the connection instead of answering (a network failure; over HTTP/2 every stream on it is lost). */
  hangUp?: boolean;
  /** Wait this long before answering. */
  delayMs?: number;
  /** The body exactly as given, as text/html instead of JSON (a proxy's error page, say). */
  text?: string;
  /** A body of this many bytes (`text` repeated, or `x`), written as fast as the client takes it; see FakeFcmSend.answeredBytes. */
  bodyBytes?: number;
  /** Sends the status, then one byte of body every 100 ms and never ends (a peer that holds the answer open). */
  stall?: boolean;
}

/** Google's error body: `{error: {code, message, status, details}}`; `details` adds more after the FcmError and BadRequest ones. */
export function googleError(
  status: number,
  message: string,
  options: { fcmErrorCode?: string; field?: string; googleStatus?: string; details?: unknown[] } = {},
): { error: { code: number; message: string; status: string; details?: unknown[] } } {
  const details: unknown[] = [];
  if (options.fcmErrorCode) details.push({ '@type': FCM_ERROR_TYPE, errorCode: options.fcmErrorCode });
  if (options.field) details.push({ '@type': BAD_REQUEST_TYPE, fieldViolations: [{ field: options.field, description: message }] });
  details.push(...(options.details ?? []));
  return {
    error: {
      code: status,
      message,
      status: options.googleStatus ?? GOOGLE_STATUS[status] ?? 'UNKNOWN',
      ...(details.length ? { details } : {}),
    },
  };
}

const retryAfter = (seconds: number | undefined): Record<string, string> | undefined =>
  seconds === undefined ? undefined : { 'Retry-After': String(seconds) };

/** Answers as FCM gives them (https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode). */
export const fcmAnswer = {
  ok: (): FcmAnswer => ({ status: 200 }),
  error: (status: number, fcmErrorCode: string | undefined, message: string, headers?: Record<string, string>, field?: string, details?: unknown[]): FcmAnswer => ({
    status,
    body: googleError(status, message, { fcmErrorCode, field, details }),
    headers,
  }),
  /** 404 UNREGISTERED: the app was uninstalled or the token expired. */
  unregistered: (): FcmAnswer => fcmAnswer.error(404, 'UNREGISTERED', 'Requested entity was not found.'),
  /** 400 INVALID_ARGUMENT about the token (a malformed registration token). */
  invalidToken: (): FcmAnswer =>
    fcmAnswer.error(400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token', undefined, 'message.token'),
  /** 400 INVALID_ARGUMENT about the message itself. */
  invalidArgument: (message: string, field?: string): FcmAnswer => fcmAnswer.error(400, 'INVALID_ARGUMENT', message, undefined, field),
  /** 403 SENDER_ID_MISMATCH: the token belongs to another Firebase project. */
  senderIdMismatch: (): FcmAnswer => fcmAnswer.error(403, 'SENDER_ID_MISMATCH', 'SenderId mismatch'),
  /** 401 THIRD_PARTY_AUTH_ERROR: the APNs certificate or key of the project is wrong. */
  thirdPartyAuth: (): FcmAnswer => fcmAnswer.error(401, 'THIRD_PARTY_AUTH_ERROR', 'Auth error from APNS or Web Push Service'),
  /** 429 QUOTA_EXCEEDED (RESOURCE_EXHAUSTED) that says no more: not which quota, nor whose. With Retry-After when given. */
  quotaExceeded: (retryAfterSeconds?: number): FcmAnswer =>
    fcmAnswer.error(429, 'QUOTA_EXCEEDED', 'Quota exceeded for quota metric "Send requests" of service fcm.googleapis.com.', retryAfter(retryAfterSeconds)),
  /**
   * 429 for the project's per-minute send quota, as Google answers it (firebase/firebase-admin-go#719):
   * RESOURCE_EXHAUSTED with no FcmError, Service Control's message, an ErrorInfo naming the
   * project's limit, and a Help link.
   */
  projectQuotaExceeded: (projectNumber: string, retryAfterSeconds?: number): FcmAnswer => ({
    status: 429,
    headers: retryAfter(retryAfterSeconds),
    body: googleError(
      429,
      `Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:${projectNumber}'.`,
      {
        details: [
          {
            '@type': ERROR_INFO_TYPE,
            reason: 'RATE_LIMIT_EXCEEDED',
            domain: 'googleapis.com',
            metadata: {
              quota_limit_value: '600000',
              consumer: `projects/${projectNumber}`,
              quota_metric: 'fcm.googleapis.com/send_requests',
              quota_unit: '1/min/{project}',
              service: 'fcm.googleapis.com',
              quota_location: 'global',
              quota_limit: 'SendsPerMinutePerProject',
            },
          },
          { '@type': HELP_TYPE, links: [{ description: 'Request a higher quota limit.', url: 'https://cloud.google.com/docs/quotas/help/request_increase' }] },
        ],
      },
    ),
  }),
  /**
   * 429 QUOTA_EXCEEDED for one device's message rate, with the google.rpc.QuotaFailure FCM's
   * reference promises. Google publishes no sample of it: its violation's wording is ours.
   */
  deviceMessageRateExceeded: (retryAfterSeconds?: number): FcmAnswer =>
    fcmAnswer.error(429, 'QUOTA_EXCEEDED', 'Device message rate exceeded.', retryAfter(retryAfterSeconds), undefined, [
      { '@type': QUOTA_FAILURE_TYPE, violations: [{ subject: 'device', description: 'Device message rate exceeded' }] },
    ]),
  /** 500 INTERNAL. */
  internal: (retryAfterSeconds?: number): FcmAnswer =>
    fcmAnswer.error(500, 'INTERNAL', 'Internal error encountered.', retryAfter(retryAfterSeconds)),
  /** 503 UNAVAILABLE. */
  unavailable: (retryAfterSeconds?: number): FcmAnswer =>
    fcmAnswer.error(503, 'UNAVAILABLE', 'The service is currently unavailable.', retryAfter(retryAfterSeconds)),
  /** The connection is cut before an answer. */
  hangUp: (): FcmAnswer => ({ status: 0, hangUp: true }),
};

export type FakeResponse = ServerResponse | Http2ServerResponse;

/** The status line and headers of either kind of response (their overloads do not unite in @types/node 24). */
const writeHead = (res: FakeResponse, status: number, headers: OutgoingHttpHeaders) =>
  (res as { writeHead(status: number, headers: OutgoingHttpHeaders): unknown }).writeHead(status, headers);

/** Header names in lower case: HTTP/2 allows no others. */
const lowerCased = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));

export function answerJson(res: FakeResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(payload);
  writeHead(res, status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text), ...lowerCased(headers) });
  res.end(text);
}

/** A scripted answer that is not Google's JSON: a page, a body too large to read, one that never ends. */
export function answerRaw(res: FakeResponse, scripted: FcmAnswer, entry: { answeredBytes: number }): void {
  const named = lowerCased(scripted.headers ?? {});
  const text = Buffer.from(scripted.text ?? 'x');
  let closed = false;
  res.once('close', () => (closed = true));
  res.on('error', () => undefined);
  const write = (chunk: Buffer) => {
    entry.answeredBytes += chunk.length;
    return (res as { write(chunk: Buffer): boolean }).write(chunk);
  };
  if (scripted.stall) {
    writeHead(res, scripted.status, { 'content-type': 'application/json; charset=UTF-8', ...named });
    const timer = setInterval(() => write(Buffer.from(' ')), 100);
    res.once('close', () => clearInterval(timer));
    return;
  }
  const total = scripted.bodyBytes ?? text.length;
  writeHead(res, scripted.status, { 'content-type': 'text/html; charset=UTF-8', 'content-length': total, ...named });
  const block = Buffer.alloc(Math.min(total, 64 * 1024), text);
  const pump = () => {
    while (!closed && entry.answeredBytes < total) {
      const chunk = block.subarray(0, Math.min(block.length, total - entry.answeredBytes));
      if (!write(chunk)) return void res.once('drain', pump);
    }
    if (!closed) res.end();
  };
  pump();
}
