import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import http2, { type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from 'node:http2';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { testTls } from './tls';
import { InFlightCounter } from './in-flight';
import { listenLocally, readBody, sleep } from './fake-server';

// A local Firebase Cloud Messaging HTTP v1 API over TLS, HTTP/2 or HTTP/1.1 as the client asks by
// ALPN (as Google's front ends do):
// - POST /token: Google's OAuth2 JWT-bearer grant (what a `cert()` credential sends to
//   oauth2.googleapis.com). The assertion's RS256 signature is checked with the service account's
//   public key, and its claims (iss, aud, iat/exp, scope) as Google checks them; refused
//   (refuseGrants) or answered 429 (throttleGrants) when a test asks.
// - POST /v1/projects/{project_id}/messages:send: needs `Authorization: Bearer <issued token>`,
//   reads `{message}`, refuses what FCM refuses (unknown field names, a bad ttl or colour, a
//   non-https webpush link, non-string data values), and answers `{name}` or a scripted answer in
//   Google's error shape (status, FcmError details, headers such as Retry-After), or what a
//   misbehaving peer sends: a page that is not JSON, a body too large to read, one that never ends.
// Point a client at it with `fake.agent` (every connection goes to this server, with the test CA).
// Each request records the HTTP version it came over and the connection it came on.

export const GOOGLE_TOKEN_AUDIENCE = 'https://oauth2.googleapis.com/token';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ACCEPTED_SCOPES = ['https://www.googleapis.com/auth/firebase.messaging', 'https://www.googleapis.com/auth/cloud-platform'];
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

/** A service account key file as Google issues it (the fields firebase-admin's `cert()` reads). */
export interface FakeServiceAccount {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  token_uri: string;
}

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

/** One POST to messages:send, whatever was answered. */
export interface FakeFcmSend {
  /** message.token (undefined for topic or condition messages). */
  token: string | undefined;
  /**
   * The `message` as FCM reads it: every field under its proto name (collapse_key, fcm_options,
   * body_loc_args), whichever JSON spelling was sent; ttl as sent ("3600s"). Struct contents
   * (apns.payload, webpush.notification) are kept as sent. Raw when it could not be read.
   */
  message: Record<string, any>;
  /** The `message` object exactly as received. */
  raw: Record<string, any>;
  validateOnly: boolean;
  projectId: string;
  authorization: string | undefined;
  /** The Host header, or `:authority` over HTTP/2. */
  host: string | undefined;
  /** '2.0' or '1.1'. */
  httpVersion: string;
  /** Which connection it came on (numbered from 1 in the order they were first seen). */
  connection: number;
  status: number;
  /** Why it was refused, 'scripted', or 'sent'. */
  reason: string;
  /** When the request arrived (ms since epoch). */
  at: number;
  /** Bytes of answer body written to the client (for a `bodyBytes` answer: until the client stopped taking them). */
  answeredBytes: number;
  /** The client closed or reset the request before the answer was complete. */
  cancelled: boolean;
}

/** One POST to /token. */
export interface FakeTokenGrant {
  status: number;
  /** The verified claims (null when the assertion could not be read). */
  claims: Record<string, unknown> | null;
  reason: string;
  accessToken: string | null;
  /** Bytes of a scripted answer's body written to the client (answerGrants()); unset for the fake's own answers. */
  answeredBytes?: number;
}

export interface FakeFcmOptions {
  projectId?: string;
  /** Lifetime of issued access tokens, in seconds (Google: 3599). */
  tokenLifetimeSeconds?: number;
  /** Refuse messages whose JSON is larger than this (400 "Message is too big"); unset: no limit. */
  maxMessageBytes?: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS of each HTTP/2 connection (Google's FCM: 100); unset: node's default. */
  maxConcurrentStreams?: number;
  /** Every send is answered this long after it arrived, as a provider that far away would (a script's delayMs adds to it). */
  answerDelayMs?: number;
  /**
   * No send is answered before this many have been in flight at once (or 10 s have gone by); after
   * that, as answerDelayMs says. A test of the client's peak then does not depend on how fast this
   * machine opens connections. resetPeaks() closes the gate again.
   */
  holdUntilInFlight?: number;
}

/** Sends every connection to the fake (whatever host the URL names), trusting the test CA. */
export class FakeFcmAgent extends https.Agent {
  constructor(
    private readonly targetPort: number,
    private readonly trustedCa: string,
  ) {
    super({ keepAlive: true, ca: trustedCa });
  }

  // Like https.Agent's own createConnection, the socket is returned (the agent attaches it). ALPN
  // is passed on, so an HTTP/2 client opening its connections here gets h2.
  override createConnection(options: https.RequestOptions): Duplex {
    const { servername, ALPNProtocols } = options as tls.ConnectionOptions;
    return tls.connect({ host: '127.0.0.1', port: this.targetPort, servername: servername || options.hostname || options.host || 'localhost', ca: this.trustedCa, ALPNProtocols });
  }
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    reason: string,
  ) {
    super(reason);
  }
}

const invalid = (message: string, field?: string) =>
  new Refusal(400, googleError(400, message, { fcmErrorCode: 'INVALID_ARGUMENT', field }), message);
const unknownName = (name: string, where: string) =>
  invalid(`Invalid JSON payload received. Unknown name "${name}" at '${where}': Cannot find field.`, where);

// The v1 Message resource (https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages).
// Like every Google JSON API (proto3 JSON), FCM accepts each field under its proto name
// (collapse_key) or its lowerCamelCase JSON name (collapseKey); firebase-admin sends a mix of both.
// 'struct' fields take any JSON object (apns.payload, webpush.notification); 'map' fields take
// string values only.
type Shape = { [protoName: string]: Shape | 'leaf' | 'map' | 'struct' };
const ANDROID_NOTIFICATION: Shape = Object.fromEntries(
  [
    'title', 'body', 'icon', 'color', 'sound', 'tag', 'click_action', 'body_loc_key', 'body_loc_args', 'title_loc_key',
    'title_loc_args', 'channel_id', 'ticker', 'sticky', 'event_time', 'local_only', 'notification_priority',
    'default_sound', 'default_vibrate_timings', 'default_light_settings', 'vibrate_timings', 'visibility',
    'notification_count', 'image', 'bypass_proxy_notification', 'proxy',
  ].map((name) => [name, 'leaf' as const]),
);
ANDROID_NOTIFICATION.light_settings = 'struct';
const MESSAGE_SHAPE: Shape = {
  name: 'leaf',
  data: 'map',
  notification: { title: 'leaf', body: 'leaf', image: 'leaf' },
  android: {
    collapse_key: 'leaf', priority: 'leaf', ttl: 'leaf', restricted_package_name: 'leaf', data: 'map',
    notification: ANDROID_NOTIFICATION, fcm_options: { analytics_label: 'leaf' },
    direct_boot_ok: 'leaf', bandwidth_constrained_ok: 'leaf', restricted_satellite_ok: 'leaf',
  },
  webpush: { headers: 'map', data: 'map', notification: 'struct', fcm_options: { link: 'leaf', analytics_label: 'leaf' } },
  apns: { headers: 'map', payload: 'struct', fcm_options: { analytics_label: 'leaf', image: 'leaf' }, live_activity_token: 'leaf' },
  fcm_options: { analytics_label: 'leaf' },
  token: 'leaf',
  topic: 'leaf',
  condition: 'leaf',
};
const camel = (protoName: string) => protoName.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

/** The message under FCM's proto field names, as FCM reads it; refuses what FCM's parser refuses. */
function normalize(value: unknown, shape: Shape, path: string): Record<string, any> {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid(`Invalid value at '${path}': must be an object`, path);
  const out: Record<string, any> = {};
  for (const [key, item] of Object.entries(value)) {
    const protoName = Object.keys(shape).find((name) => name === key || camel(name) === key);
    if (!protoName) throw unknownName(key, path);
    const where = `${path}.${protoName}`;
    if (protoName in out) throw invalid(`Invalid JSON payload received. Duplicate field "${protoName}" at '${path}'.`, where);
    const kind = shape[protoName];
    if (kind === 'map') {
      if (!item || typeof item !== 'object' || Array.isArray(item)) throw invalid(`Invalid value at '${where}': must be a map`, where);
      for (const [entry, text] of Object.entries(item)) {
        if (typeof text !== 'string') throw invalid(`Invalid value at '${where}[${entry}]' (TYPE_STRING), ${JSON.stringify(text)}`, `${where}[${entry}]`);
      }
      out[protoName] = item;
    } else if (kind === 'struct') {
      if (!item || typeof item !== 'object' || Array.isArray(item)) throw invalid(`Invalid value at '${where}' (type.googleapis.com/google.protobuf.Struct)`, where);
      out[protoName] = item;
    } else if (kind === 'leaf') {
      out[protoName] = item;
    } else {
      out[protoName] = normalize(item, kind, where);
    }
  }
  return out;
}

/** What FCM itself checks before accepting a message (the parts a client can get wrong). */
function checkMessage(message: unknown, maxMessageBytes: number | undefined): Record<string, any> {
  const msg = normalize(message, MESSAGE_SHAPE, 'message');
  const targets = ['token', 'topic', 'condition'].filter((key) => msg[key] !== undefined);
  if (targets.length !== 1) throw invalid('Exactly one of token, topic or condition must be set.', 'message');
  if (msg.token !== undefined && (typeof msg.token !== 'string' || msg.token.trim() === '')) {
    throw invalid('The registration token is not a valid FCM registration token', 'message.token');
  }
  const android = msg.android ?? {};
  if (android.ttl !== undefined && !/^\d+(\.\d{1,9})?s$/.test(String(android.ttl))) {
    throw invalid(`Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), ${JSON.stringify(android.ttl)}`, 'message.android.ttl');
  }
  if (android.priority !== undefined && !/^(normal|high)$/i.test(String(android.priority))) {
    throw invalid(`Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), ${JSON.stringify(android.priority)}`, 'message.android.priority');
  }
  const color = android.notification?.color;
  if (color !== undefined && !/^#[0-9a-fA-F]{6}$/.test(String(color))) {
    throw invalid('Invalid color format. Color must be in the format #rrggbb', 'message.android.notification.color');
  }
  const link = msg.webpush?.fcm_options?.link;
  if (link !== undefined && !/^https:\/\//i.test(String(link))) {
    throw invalid('The link must be a valid HTTPS URL', 'message.webpush.fcm_options.link');
  }
  const aps = msg.apns?.payload?.aps;
  if (msg.apns?.payload !== undefined && (aps === null || (aps !== undefined && typeof aps !== 'object'))) {
    throw invalid('Invalid APNs payload', 'message.apns.payload');
  }
  if (maxMessageBytes !== undefined && Buffer.byteLength(JSON.stringify(msg)) > maxMessageBytes) {
    throw invalid('Message is too big', 'message');
  }
  return msg;
}

function base64urlJson(part: string): Record<string, unknown> {
  const value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('not an object');
  return value;
}

type FakeRequest = IncomingMessage | Http2ServerRequest;
type FakeResponse = ServerResponse | Http2ServerResponse;

/** The status line and headers of either kind of response (their overloads do not unite in @types/node 24). */
const writeHead = (res: FakeResponse, status: number, headers: OutgoingHttpHeaders) =>
  (res as { writeHead(status: number, headers: OutgoingHttpHeaders): unknown }).writeHead(status, headers);



export class FakeFcm {
  /** PEM of the CA that signed the fake's certificate. */
  readonly ca: string;
  /** Every messages:send request, in arrival order, with what was answered. */
  readonly requests: FakeFcmSend[] = [];
  /** Every /token request (the OAuth2 grants). */
  readonly tokenGrants: FakeTokenGrant[] = [];
  /** TLS connections accepted so far (a client that keeps connections alive opens few). */
  connections = 0;
  /** HTTP/2 sessions begun so far (each on one of those connections). */
  sessions = 0;
  /** Sends arrived and not answered yet, per connection. */
  private readonly counter = new InFlightCounter<object>();
  /** Sends arrived and not answered yet, now, and the most there have been at once. */
  get inFlight(): number {
    return this.counter.now;
  }
  get peakInFlight(): number {
    return this.counter.peak;
  }
  /** The most sends unanswered at once on one connection, and the most connections carrying some at once. */
  get peakStreamsPerConnection(): number {
    return this.counter.peakPerConnection;
  }
  get peakBusyConnections(): number {
    return this.counter.peakBusyConnections;
  }
  port = 0;
  agent!: FakeFcmAgent;
  readonly serviceAccount: FakeServiceAccount;

  private readonly server: Http2SecureServer;
  private readonly sockets = new Set<Socket>();
  private readonly liveSessions = new Set<Http2Session>();
  /** Connection numbers, by HTTP/1.1 socket or HTTP/2 session. */
  private readonly connectionIds = new WeakMap<object, number>();
  private seenConnections = 0;
  private readonly publicKey: KeyObject;
  private readonly accessTokens = new Set<string>();
  private readonly scripts = new Map<string, FcmAnswer[]>();
  private grantRefusal: string | null = null;
  /** Retry-After (seconds, or '' for none) of the 429 every grant gets; null: grants are not throttled. */
  private grantThrottle: string | null = null;
  private sent = 0;
  private closed = false;
  private grantAnswer: FcmAnswer | null = null;
  /** Sends unanswered on each connection that carries some. */

  private constructor(private readonly options: FakeFcmOptions) {
    const tlsMaterial = testTls();
    this.ca = tlsMaterial.ca;
    const projectId = options.projectId ?? `operator-test-${randomBytes(3).toString('hex')}`;
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.publicKey = publicKey;
    this.serviceAccount = {
      type: 'service_account',
      project_id: projectId,
      private_key_id: randomBytes(20).toString('hex'),
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: `firebase-adminsdk-test@${projectId}.iam.gserviceaccount.com`,
      client_id: String(BigInt(`0x${randomBytes(8).toString('hex')}`)),
      token_uri: GOOGLE_TOKEN_AUDIENCE,
    };
    const settings = options.maxConcurrentStreams === undefined ? {} : { maxConcurrentStreams: options.maxConcurrentStreams };
    this.server = http2.createSecureServer({ key: tlsMaterial.key, cert: tlsMaterial.cert, allowHTTP1: true, settings }, (req: FakeRequest, res: FakeResponse) => {
      this.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) this.json(res, 500, googleError(500, `fake-fcm: ${err.message}`));
      });
    });
    this.server.on('secureConnection', (socket: Socket) => {
      this.connections += 1;
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    this.server.on('session', (session: Http2Session) => {
      this.sessions += 1;
      this.liveSessions.add(session);
      session.on('close', () => this.liveSessions.delete(session));
      // A client that goes away mid-stream is not the fake's failure.
      session.on('error', () => undefined);
    });
  }

  static async start(options: FakeFcmOptions = {}): Promise<FakeFcm> {
    const fake = new FakeFcm(options);
    fake.port = await listenLocally(fake.server);
    fake.agent = new FakeFcmAgent(fake.port, fake.ca);
    return fake;
  }

  get projectId(): string {
    return this.serviceAccount.project_id;
  }

  /** The messages FCM accepted (answered 200), in order. */
  get delivered(): FakeFcmSend[] {
    return this.requests.filter((request) => request.status === 200);
  }

  /** The sends to one token, in order. */
  sendsTo(token: string): FakeFcmSend[] {
    return this.requests.filter((request) => request.token === token);
  }

  /**
   * Scripts the answers to sends to `token`: one answer per send, in order; the last one then
   * answers every later send. `respond(t, fcmAnswer.internal(), fcmAnswer.ok())` fails once, then succeeds.
   */
  respond(token: string, ...answers: FcmAnswer[]): this {
    if (answers.length === 0) this.scripts.delete(token);
    else this.scripts.set(token, [...answers]);
    return this;
  }

  /** Makes /token refuse every grant with 400 invalid_grant (pass null to accept again). */
  refuseGrants(description: string | null = 'Invalid grant: account not found'): this {
    this.grantRefusal = description;
    return this;
  }

  /**
   * Makes /token answer every grant 429, with Retry-After when given (pass null to grant again): a
   * token endpoint over its rate for this service account.
   */
  throttleGrants(retryAfterSeconds: number | undefined | null = undefined): this {
    this.grantThrottle = retryAfterSeconds === null ? null : retryAfterSeconds === undefined ? '' : String(retryAfterSeconds);
    return this;
  }

  /** Forgets every access token issued so far: sends with them get 401 UNAUTHENTICATED. */
  revokeAccessTokens(): this {
    this.accessTokens.clear();
    return this;
  }

  /** Makes /token give this answer (a page, a huge or endless body) instead of a grant; null: grant again. */
  answerGrants(answer: FcmAnswer | null): this {
    this.grantAnswer = answer;
    return this;
  }

  /** Clears logs and scripts (issued access tokens stay valid). */
  reset(): this {
    this.grantAnswer = null;
    this.requests.length = 0;
    this.tokenGrants.length = 0;
    this.scripts.clear();
    this.grantRefusal = null;
    this.grantThrottle = null;
    return this;
  }

  /** Forgets the peaks of sends in flight (the counts of those in flight stay). */
  resetPeaks(): this {
    this.counter.resetPeaks();
    return this;
  }

  /** TLS connections open now. */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Cuts every open connection at once, without GOAWAY (what a crashed server or a dropped link does); new ones are accepted. */
  cutConnections(): this {
    for (const session of this.liveSessions) session.destroy();
    for (const socket of this.sockets) socket.destroy();
    return this;
  }

  /** Stops listening and cuts every connection: later connections are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.cutConnections();
    this.agent?.destroy();
    await closing;
  }

  /** The connection a request came on: its HTTP/2 session, or its socket for HTTP/1.1. */
  private connectionOf(req: FakeRequest): object {
    return 'stream' in req ? req.stream.session ?? req.stream : req.socket;
  }

  private connectionId(req: FakeRequest): number {
    const key = this.connectionOf(req);
    let id = this.connectionIds.get(key);
    if (id === undefined) {
      id = ++this.seenConnections;
      this.connectionIds.set(key, id);
    }
    return id;
  }

  /** Drops the connection the request came on. */
  private hangUp(req: FakeRequest): void {
    const connection = this.connectionOf(req) as { destroy(): void };
    connection.destroy();
  }

  private async handle(req: FakeRequest, res: FakeResponse): Promise<void> {
    const body = await readBody(req);
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'POST' && path === '/token') return this.grant(body, res);
    const send = path.match(/^\/v1\/projects\/([^/]+)\/messages:send$/);
    if (req.method === 'POST' && send) return this.send(decodeURIComponent(send[1]), req, body, res);
    this.json(res, 404, googleError(404, `fake-fcm: no route for ${req.method} ${path}`));
  }

  private grant(body: string, res: FakeResponse): void {
    const refuse = (status: number, error: string, description: string, claims: Record<string, unknown> | null = null, headers?: Record<string, string>) => {
      this.tokenGrants.push({ status, claims, reason: `${error}: ${description}`, accessToken: null });
      this.json(res, status, { error, error_description: description }, headers);
    };
    if (this.grantAnswer) {
      const entry = { status: this.grantAnswer.status, claims: null, reason: 'scripted', accessToken: null, answeredBytes: 0 };
      this.tokenGrants.push(entry);
      return this.raw(res, this.grantAnswer, entry);
    }
    const form = new URLSearchParams(body);
    if (form.get('grant_type') !== JWT_BEARER) return refuse(400, 'unsupported_grant_type', 'Invalid grant_type: ' + form.get('grant_type'));
    const parts = (form.get('assertion') ?? '').split('.');
    if (parts.length !== 3) return refuse(400, 'invalid_grant', 'Invalid JWT: not a JWT');
    let header: Record<string, unknown>;
    let claims: Record<string, unknown>;
    try {
      header = base64urlJson(parts[0]);
      claims = base64urlJson(parts[1]);
    } catch {
      return refuse(400, 'invalid_grant', 'Invalid JWT: unreadable header or claims');
    }
    if (header.alg !== 'RS256') return refuse(400, 'invalid_grant', `Invalid JWT: alg ${String(header.alg)} is not RS256`, claims);
    const signed = verify('RSA-SHA256', Buffer.from(`${parts[0]}.${parts[1]}`), this.publicKey, Buffer.from(parts[2], 'base64url'));
    if (!signed) return refuse(400, 'invalid_grant', 'Invalid JWT Signature.', claims);
    if (claims.iss !== this.serviceAccount.client_email) return refuse(400, 'invalid_grant', 'Invalid grant: account not found', claims);
    if (claims.aud !== GOOGLE_TOKEN_AUDIENCE) return refuse(400, 'invalid_grant', 'Invalid JWT: Failed audience check.', claims);
    const now = Math.floor(Date.now() / 1000);
    const iat = Number(claims.iat);
    const exp = Number(claims.exp);
    if (!Number.isFinite(iat) || !Number.isFinite(exp) || iat > now + 300 || exp <= now || exp - iat > 3600) {
      return refuse(400, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.', claims);
    }
    const scopes = String(claims.scope ?? '').split(/\s+/);
    if (!scopes.some((scope) => ACCEPTED_SCOPES.includes(scope))) return refuse(400, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.', claims);
    if (this.grantRefusal !== null) return refuse(400, 'invalid_grant', this.grantRefusal, claims);
    if (this.grantThrottle !== null) {
      return refuse(429, 'rate_limit_exceeded', 'Rate Limit Exceeded', claims, this.grantThrottle ? { 'Retry-After': this.grantThrottle } : undefined);
    }
    const accessToken = `ya29.fake-${randomBytes(24).toString('base64url')}`;
    this.accessTokens.add(accessToken);
    this.tokenGrants.push({ status: 200, claims, reason: 'granted', accessToken });
    this.json(res, 200, { access_token: accessToken, expires_in: this.options.tokenLifetimeSeconds ?? 3599, token_type: 'Bearer' });
  }

  private async send(projectId: string, req: FakeRequest, body: string, res: FakeResponse): Promise<void> {
    let parsed: any;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    const raw: Record<string, any> = parsed && typeof parsed.message === 'object' && parsed.message ? parsed.message : {};
    const entry: FakeFcmSend = {
      token: typeof raw.token === 'string' ? raw.token : undefined,
      message: raw,
      raw,
      validateOnly: parsed?.validate_only === true,
      projectId,
      authorization: req.headers.authorization,
      host: String(req.headers[':authority'] ?? req.headers.host ?? '') || undefined,
      httpVersion: req.httpVersion,
      connection: this.connectionId(req),
      status: 0,
      reason: '',
      at: Date.now(),
      answeredBytes: 0,
      cancelled: false,
    };
    this.requests.push(entry);
    const connection = this.connectionOf(req);
    this.counter.opened(connection);
    // Over HTTP/2 'finish' comes for a reset stream too; an answer ended by the fake has writableEnded.
    res.once('close', () => {
      entry.cancelled = !res.writableEnded;
      this.counter.settled(connection);
    });
    if (this.options.holdUntilInFlight) await this.counter.until(this.options.holdUntilInFlight, 10_000);
    if (this.options.answerDelayMs) await sleep(this.options.answerDelayMs);
    const answer = (status: number, payload: unknown, reason: string, headers?: Record<string, string>) => {
      entry.status = status;
      entry.reason = reason;
      this.json(res, status, payload, headers);
    };
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!bearer || !this.accessTokens.has(bearer)) {
      const text = 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.';
      return answer(401, googleError(401, text), 'no valid access token');
    }
    if (projectId !== this.projectId) {
      const text = `Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/${projectId}' (or it may not exist).`;
      return answer(403, googleError(403, text), 'other project');
    }
    if (parsed === undefined || typeof parsed !== 'object' || parsed === null) {
      return answer(400, googleError(400, 'Invalid JSON payload received.'), 'not JSON');
    }
    for (const key of Object.keys(parsed)) {
      if (key !== 'message' && key !== 'validate_only') return answer(400, googleError(400, `Invalid JSON payload received. Unknown name "${key}": Cannot find field.`), 'unknown field');
    }
    try {
      entry.message = checkMessage(parsed.message, this.options.maxMessageBytes);
    } catch (err) {
      if (err instanceof Refusal) return answer(err.status, err.body, err.message);
      throw err;
    }
    const script = entry.token === undefined ? undefined : this.scripts.get(entry.token);
    const scripted = script && (script.length > 1 ? script.shift() : script[0]);
    if (scripted) {
      if (scripted.delayMs) await sleep(scripted.delayMs);
      if (scripted.hangUp) {
        entry.status = 0;
        entry.reason = 'hung up';
        this.hangUp(req);
        return;
      }
      if (scripted.text !== undefined || scripted.bodyBytes !== undefined || scripted.stall) {
        entry.status = scripted.status;
        entry.reason = 'scripted';
        return this.raw(res, scripted, entry);
      }
      if (scripted.status < 200 || scripted.status >= 300 || scripted.body !== undefined) {
        return answer(scripted.status, scripted.body ?? googleError(scripted.status, 'scripted'), 'scripted', scripted.headers);
      }
    }
    const name = `projects/${projectId}/messages/${entry.validateOnly ? 'fake_message_id' : `0:${Date.now()}%${++this.sent}`}`;
    answer(scripted?.status ?? 200, { name }, 'sent', scripted?.headers);
  }

  /** A scripted answer that is not Google's JSON: a page, a body too large to read, one that never ends. */
  private raw(res: FakeResponse, scripted: FcmAnswer, entry: { answeredBytes: number }): void {
    const named = Object.fromEntries(Object.entries(scripted.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
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

  private json(res: FakeResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(payload);
    // Lower-case names: HTTP/2 allows no others.
    const named = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
    writeHead(res, status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text), ...named });
    res.end(text);
  }
}
