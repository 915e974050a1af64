import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// A local stand-in for the operator's own platform (the bonus HTTP wallet's target): it records
// every request and answers by a script, then with a standing answer, so a test can make it fail,
// refuse, time out (by not answering in time) and finally accept.

/** A scripted answer: a status, or a status with a body and a delay before answering. */
export type PlatformAnswer = number | { status: number; body?: string; delayMs?: number };

export interface PlatformRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as sent. */
  body: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json: any;
  at: number;
}

export class FakePlatform {
  readonly received: PlatformRequest[] = [];
  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private script: Exclude<PlatformAnswer, number>[] = [];
  private standing: Exclude<PlatformAnswer, number> = { status: 201, body: '{"reference":"P-1"}' };

  private constructor() {
    this.server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        this.received.push({ method: request.method ?? '', path: request.url ?? '', headers: request.headers, body, json, at: Date.now() });
        const answer = this.script.shift() ?? this.standing;
        const send = () => {
          if (response.destroyed || response.writableEnded) return;
          response.writeHead(answer.status, { 'content-type': 'application/json' });
          response.end(answer.body ?? '');
        };
        if (answer.delayMs) {
          const timer = setTimeout(() => {
            this.timers.delete(timer);
            send();
          }, answer.delayMs);
          this.timers.add(timer);
        } else send();
      });
    });
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(): Promise<FakePlatform> {
    const fake = new FakePlatform();
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/credits`;
  }

  /** The next answers, in order; after them the standing answer. */
  respond(...answers: PlatformAnswer[]): this {
    this.script.push(...answers.map((answer) => (typeof answer === 'number' ? { status: answer } : answer)));
    return this;
  }

  /** The answer once the script is used up. */
  always(answer: PlatformAnswer): this {
    this.standing = typeof answer === 'number' ? { status: answer } : answer;
    return this;
  }

  /** Clears the script, the standing answer (back to 201 P-1) and what was received. */
  reset(): this {
    this.script = [];
    this.standing = { status: 201, body: '{"reference":"P-1"}' };
    this.received.length = 0;
    return this;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
