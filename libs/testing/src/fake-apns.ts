import { generateKeyPairSync, randomBytes, randomUUID, verify, type KeyObject } from 'node:crypto';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { testTls } from './tls';
import { InFlightCounter } from './in-flight';

/** What the fake answers to one request: a status, APNs' `{reason}` body, and extra headers. */
export interface ApnsAnswer {
  status: number;
  /** APNs' reason, as the JSON body `{"reason": ...}`; left out with a 200. */
  reason?: string;
  /** For a 410: when the token stopped being valid (milliseconds since the epoch); defaults to now. */
  timestamp?: number;
  /** Extra response headers, such as `retry-after`. */
  headers?: Record<string, string>;
  /** Answers only after this many milliseconds (a slow APNs). */
  delayMs?: number;
  /** The body exactly as given instead of `{reason}` (a page that is not JSON, say). */
  text?: string;
  /** A body of this many bytes (`text` repeated, or `x`), written as fast as the client takes it; see answeredBytes. */
  bodyBytes?: number;
  /** Sends the status, then one byte of body every 100 ms, and never ends (a peer that holds the answer open). */
  stall?: boolean;
}

/** One request the fake received, as APNs would read it. */
export interface ApnsRecordedRequest {
  method: string;
  path: string;
  /** The device token from `/3/device/{token}`. */
  token: string;
  topic: string | undefined;
  pushType: string | undefined;
  priority: string | undefined;
  expiration: string | undefined;
  /** The apns-id the client sent, if any. */
  apnsId: string | undefined;
  collapseId: string | undefined;
  authorization: string | undefined;
  /** The parsed JSON body (undefined when it was not JSON). */
  body: unknown;
  /** Byte length of the body. */
  bodyBytes: number;
  /** Which HTTP/2 session (connection) carried it: 1 for the first one the fake accepted. */
  session: number;
  /** What the fake answered. */
  status: number;
  reason: string | undefined;
  /** The apns-id the fake answered with (the client's own, or one it made). */
  responseApnsId: string;
  /** When the request arrived (ms since epoch). */
  at: number;
  /** Bytes of answer body written to the client (for a `bodyBytes` answer: until the client stopped taking them). */
  answeredBytes: number;
  /** The stream was reset with CANCEL (the client gave up on the answer) rather than closed after it. */
  cancelled: boolean;
}

export interface FakeApnsOptions {
  /** SETTINGS_MAX_CONCURRENT_STREAMS of each connection; unset: node's default (none announced). */
  maxConcurrentStreams?: number;
  /** Every request is answered this long after it came, as an APNs that far away would (a script's delayMs adds to it). */
  answerDelayMs?: number;
}

/** APNs' limit for a regular remote notification payload. */
export const APNS_MAX_PAYLOAD_BYTES = 4096;
/** APNs refuses provider tokens older than an hour. */
const TOKEN_MAX_AGE_SECONDS = 3600;

function base64urlJson(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A local fake of the APNs provider API (HTTP/2 over TLS with the test certificate, see testTls()):
 * `POST /3/device/{token}` with a provider token (ES256 JWT) that it checks against the key pair it
 * made. Give a client `key`, `keyId` and `teamId`, `host: '127.0.0.1'`, `port`, and `ca: testTls().ca`.
 * It answers 200 with an `apns-id`, or what a test scripted for the token with respond().
 */
export class FakeApns {
  /** The provider token signing key, as Apple hands it out (.p8: PKCS#8 PEM). */
  readonly key: string;
  readonly keyId = randomBytes(5).toString('hex').toUpperCase();
  readonly teamId = randomBytes(5).toString('hex').toUpperCase();
  port = 0;
  readonly host = '127.0.0.1';
  readonly requests: ApnsRecordedRequest[] = [];
  /** HTTP/2 sessions (one per client connection) accepted so far. */
  sessions = 0;
  /** Requests arrived and not answered yet, per session. */
  private readonly counter = new InFlightCounter<number>();
  /** Requests arrived and not answered yet, now, and the most there have been at once. */
  get inFlight(): number {
    return this.counter.now;
  }
  get peakInFlight(): number {
    return this.counter.peak;
  }
  /** The most requests unanswered at once on one session, and the most sessions carrying some at once. */
  get peakStreamsPerSession(): number {
    return this.counter.peakPerConnection;
  }
  get peakBusySessions(): number {
    return this.counter.peakBusyConnections;
  }

  private readonly publicKey: KeyObject;
  private readonly scripted = new Map<string, ApnsAnswer[]>();
  private readonly open = new Set<http2.ServerHttp2Session>();
  private server: http2.Http2SecureServer | null = null;

  private constructor(private readonly options: FakeApnsOptions = {}) {
    const pair = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    this.key = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    this.publicKey = pair.publicKey;
  }

  static async start(options: FakeApnsOptions = {}): Promise<FakeApns> {
    const fake = new FakeApns(options);
    await fake.listen();
    return fake;
  }

  /** The next requests for `token` get these answers, one each, in order; then 200 again. */
  respond(token: string, ...answers: ApnsAnswer[]): this {
    this.scripted.set(token, [...(this.scripted.get(token) ?? []), ...answers]);
    return this;
  }

  /** Requests for one device token. */
  requestsFor(token: string): ApnsRecordedRequest[] {
    return this.requests.filter((request) => request.token === token);
  }

  /** Open HTTP/2 sessions right now. */
  get openSessions(): number {
    return this.open.size;
  }

  /** The connection drops: every open session is cut (resolves once they are closed); the server keeps listening. */
  async disconnect(): Promise<void> {
    const sessions = [...this.open];
    this.open.clear();
    await Promise.all(
      sessions.map(
        (session) =>
          new Promise<void>((resolve) => {
            // Still in `open`, so its 'close' event is yet to come.
            session.once('close', () => resolve());
            session.destroy();
          }),
      ),
    );
  }

  /** The server goes away: open sessions are cut and new connections refused. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    await this.disconnect();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The server is back, on the same port. */
  async restart(): Promise<void> {
    if (!this.server) await this.listen();
  }

  private async listen(): Promise<void> {
    const tls = testTls();
    const settings = this.options.maxConcurrentStreams === undefined ? {} : { maxConcurrentStreams: this.options.maxConcurrentStreams };
    const server = http2.createSecureServer({ key: tls.key, cert: tls.cert, ALPNProtocols: ['h2'], settings });
    server.on('session', (session) => {
      this.sessions += 1;
      const number = this.sessions;
      this.open.add(session);
      session.on('close', () => this.open.delete(session));
      session.on('error', () => undefined);
      session.on('stream', (stream, headers) => this.handle(stream, headers, number));
    });
    server.on('error', () => undefined);
    await new Promise<void>((resolve) => server.listen(this.port, this.host, resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  private handle(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, session: number): void {
    const at = Date.now();
    stream.on('error', () => undefined);
    let recorded: ApnsRecordedRequest | undefined;
    this.counter.opened(session);
    stream.on('close', () => {
      this.counter.settled(session);
      if (recorded) recorded.cancelled = stream.rstCode === http2.constants.NGHTTP2_CANCEL;
    });
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
      } catch {
        body = undefined;
      }
      const path = String(headers[':path'] ?? '');
      const match = path.match(/^\/3\/device\/([^/?]+)$/);
      const token = match ? decodeURIComponent(match[1]) : '';
      const header = (name: string) => {
        const value = headers[name];
        return Array.isArray(value) ? value[0] : value;
      };
      const responseApnsId = header('apns-id') ?? randomUUID();
      const answer = this.answer(headers[':method'] as string, match !== null, token, header('authorization'), header('apns-topic'), raw, body);
      const entry: ApnsRecordedRequest = {
        method: String(headers[':method']),
        path,
        token,
        topic: header('apns-topic'),
        pushType: header('apns-push-type'),
        priority: header('apns-priority'),
        expiration: header('apns-expiration'),
        apnsId: header('apns-id'),
        collapseId: header('apns-collapse-id'),
        authorization: header('authorization'),
        body,
        bodyBytes: raw.length,
        session,
        status: answer.status,
        reason: answer.reason,
        responseApnsId,
        at,
        answeredBytes: 0,
        cancelled: false,
      };
      recorded = entry;
      this.requests.push(entry);
      const reply = () => {
        if (stream.destroyed) return;
        stream.respond({ ':status': answer.status, 'apns-id': responseApnsId, 'content-type': 'application/json', ...answer.headers });
        if (answer.stall || answer.text !== undefined || answer.bodyBytes !== undefined) {
          this.raw(stream, answer, entry);
          return;
        }
        if (answer.status === 200) {
          stream.end();
          return;
        }
        const timestamp = answer.status === 410 ? (answer.timestamp ?? Date.now()) : answer.timestamp;
        stream.end(JSON.stringify({ reason: answer.reason, ...(timestamp === undefined ? {} : { timestamp }) }));
      };
      const delayMs = (answer.delayMs ?? 0) + (this.options.answerDelayMs ?? 0);
      if (delayMs) setTimeout(reply, delayMs).unref();
      else reply();
    });
  }

  /** Forgets the peaks of requests in flight (the counts of those in flight stay). */
  resetPeaks(): this {
    this.counter.resetPeaks();
    return this;
  }

  /** A scripted body that is not APNs' `{reason}`: a page, one too large to read, one that never ends. */
  private raw(stream: http2.ServerHttp2Stream, answer: ApnsAnswer, recorded: ApnsRecordedRequest): void {
    const write = (chunk: Buffer) => {
      recorded.answeredBytes += chunk.length;
      return stream.write(chunk);
    };
    if (answer.stall) {
      const timer = setInterval(() => write(Buffer.from(' ')), 100);
      stream.once('close', () => clearInterval(timer));
      return;
    }
    const text = Buffer.from(answer.text ?? 'x');
    const total = answer.bodyBytes ?? text.length;
    const block = Buffer.alloc(Math.min(total, 64 * 1024), text);
    const pump = () => {
      while (!stream.destroyed && recorded.answeredBytes < total) {
        if (!write(block.subarray(0, Math.min(block.length, total - recorded.answeredBytes)))) return void stream.once('drain', pump);
      }
      if (!stream.destroyed) stream.end();
    };
    pump();
  }

  /** APNs' own checks first (provider token, path, topic, payload), then the scripted answer. */
  private answer(method: string, isDevicePath: boolean, token: string, authorization: string | undefined, topic: string | undefined, raw: Buffer, body: unknown): ApnsAnswer {
    if (method !== 'POST') return { status: 405, reason: 'MethodNotAllowed' };
    if (!isDevicePath) return { status: 404, reason: 'BadPath' };
    const tokenProblem = this.checkProviderToken(authorization);
    if (tokenProblem) return { status: 403, reason: tokenProblem };
    if (!topic) return { status: 400, reason: 'MissingTopic' };
    if (raw.length === 0) return { status: 400, reason: 'PayloadEmpty' };
    if (body === undefined) return { status: 400, reason: 'BadPayload' };
    if (raw.length > APNS_MAX_PAYLOAD_BYTES) return { status: 413, reason: 'PayloadTooLarge' };
    const queue = this.scripted.get(token);
    const scripted = queue?.shift();
    if (queue && queue.length === 0) this.scripted.delete(token);
    return scripted ?? { status: 200 };
  }

  /** Undefined when the bearer token is a valid ES256 JWT of our key, team and key id; otherwise APNs' reason. */
  private checkProviderToken(authorization: string | undefined): string | undefined {
    if (!authorization) return 'MissingProviderToken';
    const match = authorization.match(/^bearer\s+([\w-]+)\.([\w-]+)\.([\w-]+)$/i);
    if (!match) return 'InvalidProviderToken';
    const [, headerPart, payloadPart, signaturePart] = match;
    const header = base64urlJson(headerPart);
    const payload = base64urlJson(payloadPart);
    if (!header || !payload || header.alg !== 'ES256' || header.kid !== this.keyId || payload.iss !== this.teamId) {
      return 'InvalidProviderToken';
    }
    const signed = verify(
      'sha256',
      Buffer.from(`${headerPart}.${payloadPart}`),
      { key: this.publicKey, dsaEncoding: 'ieee-p1363' },
      Buffer.from(signaturePart, 'base64url'),
    );
    if (!signed) return 'InvalidProviderToken';
    const now = Math.floor(Date.now() / 1000);
    if (typeof payload.iat !== 'number' || payload.iat > now + 60) return 'InvalidProviderToken';
    if (now - payload.iat > TOKEN_MAX_AGE_SECONDS) return 'ExpiredProviderToken';
    return undefined;
  }
}
