import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

// A local HTTP peer (the CRM receiving webhooks, or the operator's platform receiving credits): it
// records every request with its raw body, for signatures, and answers by a script, so a test can
// make it fail, refuse, slow down, or disappear and come back on the same port.

/** A scripted answer: a status, or a status with headers (e.g. Retry-After), a body, a delay. */
export type CrmAnswer =
  | number
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string;
      /** Wait this long before answering (to make a client time out). */
      delayMs?: number;
      /** Destroy the socket instead of answering (a network failure). */
      hangUp?: boolean;
    };

type Answer = Exclude<CrmAnswer, number>;

/** One request the fake saw, with what became of it. */
export interface CrmRequest {
  method: string;
  /** Path and query, as requested. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as text, exactly as sent (UTF-8). */
  body: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json: any;
  /** When the request arrived (ms since epoch). */
  at: number;
  /** Whether the script applied to it (see only()); other requests are answered 200 at once. */
  scripted: boolean;
  /** The status answered; undefined while held, or when the answer never reached the client. */
  status?: number;
  /** When the answer was written (ms since epoch). */
  answeredAt?: number;
  /** The client went away (timed out, was killed) before the answer, or the fake hung up. */
  aborted: boolean;
}

const asAnswer = (answer: CrmAnswer): Answer => (typeof answer === 'number' ? { status: answer } : answer);

export class FakeCrm {
  port = 0;
  /** Every request, in arrival order. */
  readonly received: CrmRequest[] = [];

  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private script: Answer[] = [];
  private standing: Answer = { status: 200 };
  private delayMs = 0;
  private match: (request: CrmRequest) => boolean = () => true;
  private listening = false;
  private closed = false;

  private constructor() {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(): Promise<FakeCrm> {
    const crm = new FakeCrm();
    await crm.listen(0);
    crm.port = (crm.server.address() as { port: number }).port;
    return crm;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  url(path = '/webhooks/push-status'): string {
    return `${this.origin}${path}`;
  }

  /** Requests answered 2xx (the answer reached the client), in arrival order. */
  get accepted(): CrmRequest[] {
    return this.received.filter((r) => !r.aborted && r.status !== undefined && r.status >= 200 && r.status < 300);
  }

  /** The event_id of accepted requests (optionally only those `filter` keeps), each once, in order of first arrival. */
  uniqueEventIds(filter: (request: CrmRequest) => boolean = () => true): string[] {
    return [...new Set(this.accepted.filter(filter).map((r) => r.json?.event_id as string | undefined).filter((id): id is string => !!id))];
  }

  /**
   * Applies the script (fail, script, respondWith, slow) only to requests `predicate` keeps; the
   * others are answered 200 at once (and recorded with scripted: false). Undefined: every request.
   */
  only(predicate: ((request: CrmRequest) => boolean) | undefined): this {
    this.match = predicate ?? (() => true);
    return this;
  }

  /** The next `n` (scripted) requests answer `status`. */
  fail(n: number, status = 500, headers?: Record<string, string>): this {
    for (let i = 0; i < n; i += 1) this.script.push({ status, headers });
    return this;
  }

  /** Answers for the next requests, one each, in order; then the standing answer again. */
  answer(...answers: CrmAnswer[]): this {
    this.script.push(...answers.map(asAnswer));
    return this;
  }

  /** Every later request (once the script is used up) answers this, until reset() or another respondWith(). */
  respondWith(status: number, headers?: Record<string, string>, body?: string): this {
    this.standing = { status, headers, body };
    return this;
  }

  /** Answers wait this long (0: at once); a scripted answer's own delayMs wins. */
  slow(ms: number): this {
    this.delayMs = ms;
    return this;
  }

  /** Back to answering 200 at once to everything (the records are kept; see clear()). */
  reset(): this {
    this.script = [];
    this.standing = { status: 200 };
    this.delayMs = 0;
    this.match = () => true;
    return this;
  }

  /** Forgets the requests recorded so far. */
  clear(): this {
    this.received.length = 0;
    return this;
  }

  /** The CRM is gone: the listening socket is closed (connections refused) and open connections are cut. */
  async down(): Promise<void> {
    if (!this.listening) return;
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await closing;
    this.listening = false;
  }

  /** The CRM is back, on the same port. */
  async up(): Promise<void> {
    if (this.listening || this.closed) return;
    await this.listen(this.port);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await this.down();
  }

  private async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.listening = true;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const request: CrmRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, json, at, scripted: false, aborted: false };
      request.scripted = this.match(request);
      this.received.push(request);
      res.on('close', () => {
        if (!res.writableFinished) request.aborted = true;
      });

      const answer: Answer = request.scripted ? (this.script.shift() ?? this.standing) : { status: 200 };
      const delayMs = request.scripted ? (answer.delayMs ?? this.delayMs) : 0;
      const reply = () => {
        if (request.aborted || res.destroyed || req.socket.destroyed) {
          request.aborted = true;
          return;
        }
        if (answer.hangUp) {
          request.aborted = true;
          req.socket.destroy();
          return;
        }
        request.status = answer.status;
        request.answeredAt = Date.now();
        res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
        res.end(answer.body ?? (answer.status < 300 ? '{"ok":true}' : `{"error":"scripted ${answer.status}"}`));
      };
      if (delayMs > 0) {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          reply();
        }, delayMs);
        this.timers.add(timer);
      } else reply();
    });
  }
}
