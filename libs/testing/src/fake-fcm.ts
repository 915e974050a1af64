import { randomBytes, type KeyObject } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import http2, { type Http2SecureServer, type Http2ServerRequest, type Http2Session } from 'node:http2';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { answerJson, answerRaw, googleError, type FakeResponse, type FcmAnswer } from './fake-fcm-answers';
import { newServiceAccount, readGrant, type FakeServiceAccount } from './fake-fcm-grant';
import { checkMessage, Refusal } from './fake-fcm-message';
import { listenLocally, readBody, sleep } from './fake-server';
import { InFlightCounter } from './in-flight';
import { testTls } from './tls';

export { fcmAnswer, googleError, type FcmAnswer } from './fake-fcm-answers';
export { GOOGLE_TOKEN_AUDIENCE, type FakeServiceAccount } from './fake-fcm-grant';

// A local FCM HTTP v1 API over TLS, HTTP/2 or HTTP/1.1 as the client asks by ALPN, as Google's
// front ends do: POST /token grants access tokens (fake-fcm-grant.ts), POST
// /v1/projects/{id}/messages:send checks the bearer token and the message as FCM does
// (fake-fcm-message.ts) and answers `{name}` or a scripted answer (fake-fcm-answers.ts).
// Point a client at it with `fake.agent`. Each request records its HTTP version and connection.

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

type FakeRequest = IncomingMessage | Http2ServerRequest;

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

  private constructor(private readonly options: FakeFcmOptions) {
    const tlsMaterial = testTls();
    this.ca = tlsMaterial.ca;
    const projectId = options.projectId ?? `operator-test-${randomBytes(3).toString('hex')}`;
    ({ serviceAccount: this.serviceAccount, publicKey: this.publicKey } = newServiceAccount(projectId));
    const settings = options.maxConcurrentStreams === undefined ? {} : { maxConcurrentStreams: options.maxConcurrentStreams };
    this.server = http2.createSecureServer({ key: tlsMaterial.key, cert: tlsMaterial.cert, allowHTTP1: true, settings }, (req: FakeRequest, res: FakeResponse) => {
      this.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) answerJson(res, 500, googleError(500, `fake-fcm: ${err.message}`));
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
    answerJson(res, 404, googleError(404, `fake-fcm: no route for ${req.method} ${path}`));
  }

  private grant(body: string, res: FakeResponse): void {
    const refuse = (status: number, error: string, description: string, claims: Record<string, unknown> | null = null, headers?: Record<string, string>) => {
      this.tokenGrants.push({ status, claims, reason: `${error}: ${description}`, accessToken: null });
      answerJson(res, status, { error, error_description: description }, headers);
    };
    if (this.grantAnswer) {
      const entry = { status: this.grantAnswer.status, claims: null, reason: 'scripted', accessToken: null, answeredBytes: 0 };
      this.tokenGrants.push(entry);
      return answerRaw(res, this.grantAnswer, entry);
    }
    const read = readGrant(body, { publicKey: this.publicKey, clientEmail: this.serviceAccount.client_email });
    if ('refusal' in read) return refuse(400, read.refusal.error, read.refusal.description, read.refusal.claims);
    const { claims } = read;
    if (this.grantRefusal !== null) return refuse(400, 'invalid_grant', this.grantRefusal, claims);
    if (this.grantThrottle !== null) {
      return refuse(429, 'rate_limit_exceeded', 'Rate Limit Exceeded', claims, this.grantThrottle ? { 'Retry-After': this.grantThrottle } : undefined);
    }
    const accessToken = `ya29.fake-${randomBytes(24).toString('base64url')}`;
    this.accessTokens.add(accessToken);
    this.tokenGrants.push({ status: 200, claims, reason: 'granted', accessToken });
    answerJson(res, 200, { access_token: accessToken, expires_in: this.options.tokenLifetimeSeconds ?? 3599, token_type: 'Bearer' });
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
      answerJson(res, status, payload, headers);
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
        return answerRaw(res, scripted, entry);
      }
      if (scripted.status < 200 || scripted.status >= 300 || scripted.body !== undefined) {
        return answer(scripted.status, scripted.body ?? googleError(scripted.status, 'scripted'), 'scripted', scripted.headers);
      }
    }
    const name = `projects/${projectId}/messages/${entry.validateOnly ? 'fake_message_id' : `0:${Date.now()}%${++this.sent}`}`;
    answer(scripted?.status ?? 200, { name }, 'sent', scripted?.headers);
  }
}
