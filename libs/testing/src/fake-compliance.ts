import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { listenLocally } from './fake-server';
import { testTls } from './tls';

// The operator's own endpoints as the CRM reads them (GET /userblocks/{user_id}, GET
// /userconsents/{user_id}), served from a table a test changes at will: a player self-excludes,
// withdraws consent, or is unknown (404). It can refuse to answer for a while (503), answer late,
// check the credential (API key header or HTTP Basic), and counts what was asked.

export interface ComplianceBlock {
  active: boolean;
  type: string;
  note?: string;
}

export interface ComplianceConsent {
  opted_in: boolean;
  type: string;
}

/** What the operator holds for one player. */
export interface CompliancePlayer {
  blocks: ComplianceBlock[];
  consents: ComplianceConsent[];
}

export interface FakeComplianceOptions {
  /** Requests must carry this key in `apiKeyHeader` (default X-Api-Key); else 401. */
  apiKey?: string;
  apiKeyHeader?: string;
  /** Requests must carry these as HTTP Basic; else 401. */
  username?: string;
  password?: string;
  /** Every answer waits this long (see slow()). */
  delayMs?: number;
  /** What a player not in the table gets: 404 (an unknown player, the default) or this record. */
  unknown?: CompliancePlayer;
  /** Serve HTTPS with the test certificate (trust testTls().ca). */
  tls?: boolean;
}

/** A player who may get pushes: no block, push consent opted in. */
export const optedIn = (): CompliancePlayer => ({ blocks: [], consents: [{ opted_in: true, type: 'pushNotification' }, { opted_in: true, type: 'email' }] });

export class FakeCompliance {
  port = 0;
  /** The operator's records, by user id; change them at will. */
  readonly players = new Map<string, CompliancePlayer>();
  /** Requests answered 2xx or 404, by path (`/userblocks/<id>`, as requested, still encoded). */
  readonly answered = new Map<string, number>();
  /** Every request that arrived, whatever its answer. */
  requests = 0;
  /** Requests refused while unavailable (see unavailable()). */
  refused = 0;
  /** Requests turned away for a missing or wrong credential. */
  unauthorized = 0;

  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private delayMs: number;
  private unavailableStatus: number | undefined;
  private unavailableUntil = 0;

  private constructor(
    private readonly options: FakeComplianceOptions,
    readonly ca: string | undefined,
  ) {
    this.delayMs = options.delayMs ?? 0;
    const handler = (req: IncomingMessage, res: ServerResponse) => this.handle(req, res);
    if (options.tls) {
      const tls = testTls();
      this.server = https.createServer({ key: tls.key, cert: tls.cert }, handler);
    } else this.server = http.createServer(handler);
    this.server.keepAliveTimeout = 60_000;
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(options: FakeComplianceOptions = {}): Promise<FakeCompliance> {
    const fake = new FakeCompliance(options, options.tls ? testTls().ca : undefined);
    fake.port = await listenLocally(fake.server);
    return fake;
  }

  /** What COMPLIANCE_URL names to ask here. */
  get url(): string {
    return `${this.options.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** Sets a player's record (replacing it). */
  set(userId: string, record: CompliancePlayer): this {
    this.players.set(userId, record);
    return this;
  }

  /** No block, push consent opted in. */
  allow(userId: string): this {
    return this.set(userId, optedIn());
  }

  /** An active block of this type (Excluded: self-excluded; Blocked: by the operator), consent kept. */
  block(userId: string, type = 'Excluded', note = 'set by the test'): this {
    const record = this.players.get(userId) ?? optedIn();
    return this.set(userId, { ...record, blocks: [...record.blocks, { active: true, type, note }] });
  }

  /** Push consent withdrawn (opted_in false); other consents kept. */
  optOut(userId: string): this {
    const record = this.players.get(userId) ?? optedIn();
    const consents = record.consents.filter((consent) => consent.type !== 'pushNotification');
    return this.set(userId, { ...record, consents: [...consents, { opted_in: false, type: 'pushNotification' }] });
  }

  /** No pushNotification consent entry at all (other consents kept). */
  noConsentEntry(userId: string): this {
    const record = this.players.get(userId) ?? optedIn();
    return this.set(userId, { ...record, consents: record.consents.filter((consent) => consent.type !== 'pushNotification') });
  }

  /** Answers `status` (503 by default) to every request for `ms` (forever when undefined), then answers again. */
  unavailable(ms?: number, status = 503): this {
    this.unavailableStatus = status;
    this.unavailableUntil = ms === undefined ? Infinity : Date.now() + ms;
    return this;
  }

  /** Answers again at once. */
  available(): this {
    this.unavailableStatus = undefined;
    this.unavailableUntil = 0;
    return this;
  }

  /** Whether it refuses to answer now. */
  get isUnavailable(): boolean {
    return this.unavailableStatus !== undefined && Date.now() < this.unavailableUntil;
  }

  /** Answers wait this long from now on (0: at once). */
  slow(ms: number): this {
    this.delayMs = ms;
    return this;
  }

  /** Answered lookups of this player's blocks and consents. */
  asked(userId: string): { blocks: number; consents: number } {
    const id = encodeURIComponent(userId);
    return { blocks: this.answered.get(`/userblocks/${id}`) ?? 0, consents: this.answered.get(`/userconsents/${id}`) ?? 0 };
  }

  /** Answered lookups in all. */
  get answeredTotal(): number {
    let total = 0;
    for (const n of this.answered.values()) total += n;
    return total;
  }

  /** Forgets the counts (the table is kept). */
  clearCounts(): this {
    this.answered.clear();
    this.requests = 0;
    this.refused = 0;
    this.unauthorized = 0;
    return this;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closing;
  }

  private authorized(req: IncomingMessage): boolean {
    const { apiKey, apiKeyHeader = 'X-Api-Key', username, password } = this.options;
    if (apiKey !== undefined && req.headers[apiKeyHeader.toLowerCase()] !== apiKey) return false;
    if (username !== undefined) {
      const expected = `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}`;
      if (req.headers.authorization !== expected) return false;
    }
    return true;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests += 1;
    req.resume();
    const send = (status: number, body: unknown) => {
      if (res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const answer = () => {
      const path = (req.url ?? '').split('?')[0];
      if (this.isUnavailable) {
        this.refused += 1;
        return send(this.unavailableStatus!, { error: 'unavailable' });
      }
      if (!this.authorized(req)) {
        this.unauthorized += 1;
        return send(401, { error: 'unauthorized' });
      }
      const match = /^\/(userblocks|userconsents)\/([^/]+)$/.exec(path);
      if (req.method !== 'GET' || !match) return send(404, { error: 'not found' });
      let userId: string;
      try {
        userId = decodeURIComponent(match[2]);
      } catch {
        return send(400, { error: 'bad user id' });
      }
      this.answered.set(path, (this.answered.get(path) ?? 0) + 1);
      const record = this.players.get(userId) ?? this.options.unknown;
      if (!record) return send(404, { error: 'unknown player' });
      send(200, match[1] === 'userblocks' ? { blocks: record.blocks } : { consents: record.consents });
    };
    if (this.delayMs > 0) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        answer();
      }, this.delayMs);
      this.timers.add(timer);
    } else answer();
  }
}
