import { createECDH, createPublicKey, createDecipheriv, hkdfSync, randomBytes, randomUUID, verify, type ECDH } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { CrmAnswer } from './fake-crm';
import { testTls } from './tls';
import { listenLocally } from './fake-server';

// A local Web Push service over TLS that checks what a real one checks: the VAPID header (RFC 8292)
// and the aes128gcm body (RFC 8291), which it decrypts, so a test sees what the browser would.

/**
 * A scripted answer of the push service: the CRM fake's shapes (a status; or status, headers,
 * body, delay, hang-up), and answers a hostile endpoint would give: a body trickled a byte at a
 * time, or a huge one streamed. See `pushAnswers` for the usual ones.
 */
export type FakePushAnswer =
  | number
  | (Exclude<CrmAnswer, number> & {
      /** After the status and headers, write one byte of body every this many ms, never ending. */
      trickleMs?: number;
      /** Stream a body of this many bytes (one chunk written again and again, as the client reads). */
      streamBytes?: number;
    });

/** Answers a test scripts often. */
export const pushAnswers = {
  /** A 200 whose body comes one byte every `everyMs`, for ever. */
  trickle: (everyMs: number, status = 200): FakePushAnswer => ({ status, trickleMs: everyMs }),
  /** A 200 with a body of `bytes` (200 MiB, say), streamed. */
  huge: (bytes: number, status = 200): FakePushAnswer => ({ status, streamBytes: bytes }),
  /** A redirect to `location`. */
  redirect: (status: 301 | 302 | 303 | 307 | 308, location: string): FakePushAnswer => ({ status, headers: { Location: location } }),
  /** `status` (429, 503) with `Retry-After: seconds`. */
  retryAfter: (status: number, seconds: number, body?: string): FakePushAnswer => ({ status, headers: { 'Retry-After': String(seconds) }, body }),
};

type ScriptedAnswer = Exclude<FakePushAnswer, number>;

const STREAM_CHUNK = Buffer.alloc(64 * 1024, 'x');

/** A message the fake accepted (answered 2xx), decrypted. */
export interface FakePushMessage {
  /** The subscription id (last path segment of the endpoint). */
  id: string;
  /** The decrypted payload, parsed as JSON (undefined when it is not JSON). */
  payload: unknown;
  /** The decrypted payload as text. */
  plaintext: string;
  /** Headers of the push request (RFC 8030). */
  ttl: number;
  urgency: string | undefined;
  topic: string | undefined;
  /** The VAPID public key (k=) whose signature was verified, base64url. */
  vapidKey: string;
  /** The JWT's sub claim. */
  vapidSubject: string;
  status: number;
  /** The Location header answered (the message resource), when 2xx. */
  location: string | undefined;
  /** When the request arrived (ms since epoch). */
  at: number;
}

/** Every request the fake saw, with what it answered and why. */
export interface FakePushRequestLog {
  id: string | null;
  /** When the request arrived (ms since epoch). */
  at: number;
  status: number;
  /** Why it was refused (for refused requests), or 'scripted' / 'delivered'. */
  reason: string;
  headers: IncomingMessage['headers'];
  /** Bytes of answer body the fake got written (for trickled and streamed answers, as they go). */
  bodyBytesWritten: number;
  /** The answer ended, or the client went away. */
  finished: boolean;
}

export interface FakeSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

interface SubscriptionKeys {
  ecdh: ECDH;
  publicKey: Buffer;
  auth: Buffer;
  /** The applicationServerKey the subscription was made with; when set, other VAPID keys get 403. */
  applicationServerKey?: string;
}

export interface FakePushServiceOptions {
  /** When set, every subscription only accepts this VAPID public key (403 otherwise). */
  vapidPublicKey?: string;
  /** Largest accepted body, in bytes (RFC 8030 asks push services to accept at least 4096). */
  maxBodyBytes?: number;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    reason: string,
  ) {
    super(reason);
  }
}

const MAX_JWT_LIFETIME_S = 24 * 60 * 60;
const CLOCK_SKEW_S = 60;
const URGENCIES = new Set(['very-low', 'low', 'normal', 'high']);

export class FakePushService {
  port = 0;
  /** PEM of the CA that signed the fake's certificate: trust it in the client's https.Agent. */
  readonly ca = testTls().ca;
  /** Decrypted messages that were answered 2xx, in arrival order. */
  readonly received: FakePushMessage[] = [];
  /** Every request, accepted or not. */
  readonly requests: FakePushRequestLog[] = [];
  /** TLS connections ever accepted (a keep-alive client opens few). */
  tlsConnections = 0;
  /** TCP connections ever accepted, TLS handshake or not. */
  connections = 0;
  /** Requests arrived and not answered yet, now, and the most there have been at once. */
  inFlight = 0;
  peakInFlight = 0;
  /** The most TLS connections open at once. */
  peakConnections = 0;

  private readonly server: https.Server;
  private readonly subscriptions = new Map<string, SubscriptionKeys>();
  private readonly answers = new Map<string, FakePushAnswer[]>();
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  private constructor(private readonly options: FakePushServiceOptions) {
    const tls = testTls();
    this.server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => this.handle(req, res));
    this.server.on('connection', () => {
      this.connections += 1;
    });
    this.server.on('secureConnection', (socket) => {
      this.tlsConnections += 1;
      this.sockets.add(socket);
      this.peakConnections = Math.max(this.peakConnections, this.sockets.size);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(options: FakePushServiceOptions = {}): Promise<FakePushService> {
    const fake = new FakePushService(options);
    fake.port = await listenLocally(fake.server);
    return fake;
  }

  /** The origin a VAPID JWT must name as aud. */
  get origin(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** TLS connections open right now. */
  get openConnections(): number {
    return this.sockets.size;
  }

  endpoint(id: string): string {
    return `${this.origin}/push/${encodeURIComponent(id)}`;
  }

  /**
   * A new subscription as a browser's PushManager would make it: a P-256 key pair (the fake keeps
   * the private key to decrypt) and a 16-byte auth secret.
   */
  subscription(id: string = randomUUID(), options: { applicationServerKey?: string } = {}): FakeSubscription {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const keys: SubscriptionKeys = {
      ecdh,
      publicKey: ecdh.getPublicKey(),
      auth: randomBytes(16),
      applicationServerKey: options.applicationServerKey ?? this.options.vapidPublicKey,
    };
    this.subscriptions.set(id, keys);
    return {
      endpoint: this.endpoint(id),
      keys: { p256dh: keys.publicKey.toString('base64url'), auth: keys.auth.toString('base64url') },
    };
  }

  /** Drops a subscription: later pushes to it are answered 410 Gone, as after a browser unsubscribes. */
  unsubscribe(id: string): void {
    this.subscriptions.delete(id);
  }

  /** Scripted answers for the next requests to a subscription, one per request; then 201 again. */
  respond(id: string, ...answers: FakePushAnswer[]): void {
    this.answers.set(id, [...(this.answers.get(id) ?? []), ...answers]);
  }

  /** Accepted messages for one subscription. */
  receivedFor(id: string): FakePushMessage[] {
    return this.received.filter((message) => message.id === id);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await closing;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.inFlight += 1;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    res.once('close', () => (this.inFlight -= 1));
    const chunks: Buffer[] = [];
    let size = 0;
    const limit = this.options.maxBodyBytes ?? 4096;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit + 1) chunks.push(chunk);
    });
    const at = Date.now();
    req.on('end', () => {
      const id = this.subscriptionId(req.url);
      try {
        if (req.method !== 'POST') throw new Refusal(405, 'only POST');
        if (id === null) throw new Refusal(404, 'not a push endpoint');
        const vapid = this.verifyVapid(req);
        const keys = this.subscriptions.get(id);
        if (!keys) throw new Refusal(410, 'no such subscription');
        if (keys.applicationServerKey && keys.applicationServerKey !== vapid.key) {
          throw new Refusal(403, 'VAPID key does not match the subscription');
        }
        const ttl = this.ttl(req);
        const urgency = header(req, 'urgency');
        if (urgency !== undefined && !URGENCIES.has(urgency)) throw new Refusal(400, `bad Urgency ${urgency}`);
        const topic = header(req, 'topic');
        if (topic !== undefined && !/^[A-Za-z0-9_-]{1,32}$/.test(topic)) throw new Refusal(400, `bad Topic ${topic}`);
        if (size > limit) throw new Refusal(413, `body of ${size} bytes is over ${limit}`);
        const encoding = header(req, 'content-encoding');
        if (encoding !== 'aes128gcm') throw new Refusal(400, `Content-Encoding ${encoding ?? 'missing'}, want aes128gcm`);
        const plaintext = decryptAes128gcm(Buffer.concat(chunks), keys).toString('utf8');

        const answer = this.answers.get(id)?.shift();
        const scripted: ScriptedAnswer | undefined = typeof answer === 'number' ? { status: answer } : answer;
        const status = scripted?.status ?? 201;
        const ok = status >= 200 && status < 300;
        const location = ok ? `${this.origin}/message/${randomUUID()}` : undefined;
        if (ok) {
          let payload: unknown;
          try {
            payload = JSON.parse(plaintext);
          } catch {
            payload = undefined;
          }
          this.received.push({
            id, payload, plaintext, ttl, urgency, topic, vapidKey: vapid.key, vapidSubject: vapid.subject, status, location, at,
          });
        }
        const log: FakePushRequestLog = { id, at, status, reason: scripted ? 'scripted' : 'delivered', headers: req.headers, bodyBytesWritten: 0, finished: false };
        this.requests.push(log);
        res.on('close', () => {
          log.finished = true;
        });
        const reply = () => {
          if (scripted?.hangUp) {
            req.socket.destroy();
            return;
          }
          const headers = { ...(location ? { location } : {}), ...(scripted?.headers ?? {}) };
          if (scripted?.trickleMs) return this.trickle(res, status, headers, scripted.trickleMs, log);
          if (scripted?.streamBytes) return this.stream(res, status, headers, scripted.streamBytes, log);
          const body = scripted?.body ?? '';
          res.writeHead(status, headers);
          res.end(body);
          log.bodyBytesWritten = Buffer.byteLength(body);
        };
        if (scripted?.delayMs) {
          const timer = setTimeout(() => {
            this.timers.delete(timer);
            reply();
          }, scripted.delayMs);
          this.timers.add(timer);
        } else {
          reply();
        }
      } catch (error) {
        const refusal = error instanceof Refusal ? error : new Refusal(500, String(error));
        this.requests.push({ id, at: Date.now(), status: refusal.status, reason: refusal.message, headers: req.headers, bodyBytesWritten: Buffer.byteLength(refusal.message), finished: true });
        res.writeHead(refusal.status, { 'content-type': 'text/plain' });
        res.end(refusal.message);
      }
    });
  }

  /** Status and headers at once, then a byte every `everyMs` until the client goes or the fake closes. */
  private trickle(res: ServerResponse, status: number, headers: Record<string, string>, everyMs: number, log: FakePushRequestLog): void {
    res.writeHead(status, headers);
    res.flushHeaders();
    const timer = setInterval(() => {
      res.write('x');
      log.bodyBytesWritten += 1;
    }, everyMs);
    this.timers.add(timer);
    res.on('close', () => {
      clearInterval(timer);
      this.timers.delete(timer);
    });
  }

  /** A body of `bytes`, written as fast as the client reads it (one chunk reused: nothing that size is ever allocated). */
  private stream(res: ServerResponse, status: number, headers: Record<string, string>, bytes: number, log: FakePushRequestLog): void {
    res.writeHead(status, { ...headers, 'content-length': String(bytes) });
    res.on('error', () => undefined);
    const write = () => {
      while (log.bodyBytesWritten < bytes && !res.destroyed) {
        const chunk = STREAM_CHUNK.subarray(0, Math.min(STREAM_CHUNK.length, bytes - log.bodyBytesWritten));
        log.bodyBytesWritten += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', write);
      }
      if (!res.destroyed) res.end();
    };
    write();
  }

  private subscriptionId(url: string | undefined): string | null {
    const match = /^\/push\/([^/?#]+)$/.exec(url ?? '');
    return match ? decodeURIComponent(match[1]) : null;
  }

  private ttl(req: IncomingMessage): number {
    const value = header(req, 'ttl');
    if (value === undefined || !/^\d+$/.test(value)) throw new Refusal(400, `TTL header ${value ?? 'missing'}`);
    return Number(value);
  }

  /** RFC 8292: `Authorization: vapid t=<JWT>, k=<P-256 public key>`. */
  private verifyVapid(req: IncomingMessage): { key: string; subject: string } {
    const authorization = header(req, 'authorization');
    if (!authorization) throw new Refusal(401, 'no Authorization');
    const scheme = /^vapid\s+(.*)$/i.exec(authorization);
    if (!scheme) throw new Refusal(401, 'Authorization is not the vapid scheme');
    const params = new Map<string, string>();
    for (const part of scheme[1].split(',')) {
      const at = part.indexOf('=');
      if (at > 0) params.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).trim());
    }
    const token = params.get('t');
    const key = params.get('k');
    if (!token || !key) throw new Refusal(401, 'vapid t= or k= missing');

    const raw = Buffer.from(key, 'base64url');
    if (raw.length !== 65 || raw[0] !== 0x04) throw new Refusal(401, 'k= is not an uncompressed P-256 point');
    let publicKey;
    try {
      publicKey = createPublicKey({
        key: { kty: 'EC', crv: 'P-256', x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33).toString('base64url') },
        format: 'jwk',
      });
    } catch {
      throw new Refusal(401, 'k= is not a point on P-256');
    }

    const parts = token.split('.');
    if (parts.length !== 3) throw new Refusal(401, 't= is not a JWS compact serialisation');
    const [encodedHeader, encodedClaims, encodedSignature] = parts;
    const jwtHeader = parseJson(encodedHeader);
    if (jwtHeader?.alg !== 'ES256') throw new Refusal(401, 'JWT alg is not ES256');
    const signature = Buffer.from(encodedSignature, 'base64url');
    const signed = Buffer.from(`${encodedHeader}.${encodedClaims}`);
    const valid =
      signature.length === 64 && verify('sha256', signed, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature);
    if (!valid) throw new Refusal(401, 'JWT signature does not verify with k=');

    const claims = parseJson(encodedClaims);
    if (!claims) throw new Refusal(401, 'JWT claims are not JSON');
    const origin = `https://${req.headers.host ?? ''}`;
    if (claims.aud !== origin && claims.aud !== this.origin) throw new Refusal(401, `JWT aud ${String(claims.aud)} is not ${origin}`);
    const now = Math.floor(Date.now() / 1000);
    if (typeof claims.exp !== 'number' || claims.exp <= now) throw new Refusal(401, 'JWT expired or without exp');
    if (claims.exp > now + MAX_JWT_LIFETIME_S + CLOCK_SKEW_S) throw new Refusal(401, 'JWT exp more than 24 hours away');
    if (typeof claims.sub !== 'string' || !/^(mailto:|https:)/.test(claims.sub)) throw new Refusal(401, 'JWT sub missing or not mailto:/https:');
    return { key, subject: claims.sub };
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function parseJson(encoded: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * RFC 8291 over RFC 8188: header block salt(16) | rs(4) | idlen(1) | keyid (the sender's ephemeral
 * P-256 public key), then one record, AES-128-GCM with a 16-byte tag, padded with 0x02 then zeros.
 */
export function decryptAes128gcm(body: Buffer, keys: { ecdh: ECDH; publicKey: Buffer; auth: Buffer }): Buffer {
  if (body.length < 21) throw new Refusal(400, 'body shorter than the aes128gcm header');
  const salt = body.subarray(0, 16);
  const rs = body.readUInt32BE(16);
  const idlen = body[20];
  if (idlen !== 65) throw new Refusal(400, `keyid of ${idlen} bytes, want the 65-byte sender key`);
  const senderKey = body.subarray(21, 21 + idlen);
  const ciphertext = body.subarray(21 + idlen);
  if (rs < 18) throw new Refusal(400, `record size ${rs} too small`);
  if (ciphertext.length < 17 || ciphertext.length > rs) throw new Refusal(400, 'not exactly one record');

  let ecdhSecret: Buffer;
  try {
    ecdhSecret = keys.ecdh.computeSecret(senderKey);
  } catch {
    throw new Refusal(400, 'sender key is not a P-256 point');
  }
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), keys.publicKey, senderKey]);
  const ikm = Buffer.from(hkdfSync('sha256', ecdhSecret, keys.auth, keyInfo, 32));
  const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));

  let padded: Buffer;
  try {
    const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
    decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
    padded = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()]);
  } catch {
    throw new Refusal(400, 'aes128gcm record does not decrypt');
  }
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end -= 1;
  if (end < 0 || padded[end] !== 0x02) throw new Refusal(400, 'no last-record padding delimiter');
  return padded.subarray(0, end);
}
