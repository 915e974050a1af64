import { randomUUID } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { OPEN_ROUTE_BODY_LIMIT_BYTES } from '@operator/contract';
import { INTERNAL_KEY } from '@operator/testing';
import { Harness } from './test/harness';
import { HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS } from './timeouts';

// What anyone on the internet can make the gateway hold: a connection only as long as the
// deadlines, and on the routes open without a key, a body of a few KiB, refused before it is read.

const REQUEST_TIMEOUT_MS = 2000;
/** Node looks for requests past their deadline once a second. */
const CHECK_INTERVAL_MS = 1000;

interface Exchange {
  /** What the server wrote, as text. */
  received: string;
  /** Milliseconds from the connection to the server closing it. */
  closedAfterMs: number;
  /** Bytes the client had written when the server's first byte arrived. */
  sentBeforeAnswer: number;
}

/**
 * Opens a connection and lets `send` write to it (it is told how much it wrote through `wrote`)
 * until the server closes it; stops writing as soon as the server answers.
 */
function exchange(port: number, send: (socket: net.Socket, wrote: (bytes: number) => void) => void, maxMs = 15_000): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const opened = Date.now();
    let received = '';
    let sent = 0;
    let sentBeforeAnswer = -1;
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection ${maxMs} ms; received ${JSON.stringify(received)}`));
    }, maxMs);
    socket.on('data', (chunk) => {
      if (sentBeforeAnswer < 0) sentBeforeAnswer = sent;
      received += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(giveUp);
      resolve({ received, closedAfterMs: Date.now() - opened, sentBeforeAnswer });
    });
    send(socket, (bytes) => (sent += bytes));
  });
}

/** Writes `text` one byte every `everyMs` until the server has answered or closed. */
function trickle(socket: net.Socket, text: string, everyMs: number, wrote: (bytes: number) => void) {
  let at = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || !socket.writable || at >= text.length) return clearInterval(timer);
    socket.write(text[at++]);
    wrote(1);
  }, everyMs);
  socket.on('close', () => clearInterval(timer));
}

/** Streams chunks of 1 KiB without Content-Length (chunked), every few ms, until the server answers; up to 1 MiB. */
function streamChunked(socket: net.Socket, head: string, wrote: (bytes: number) => void) {
  socket.write(`${head}Transfer-Encoding: chunked\r\n\r\n`);
  let chunks = 0;
  let answered = false;
  socket.once('data', () => (answered = true));
  const timer = setInterval(() => {
    if (answered || socket.destroyed || !socket.writable || chunks === 1024) return clearInterval(timer);
    socket.write(`400\r\n${'x'.repeat(1024)}\r\n`);
    wrote(1024);
    chunks++;
  }, 5);
  socket.on('close', () => clearInterval(timer));
}

function statusOf(received: string): { status: number; body: unknown; headers: string } {
  const [head, ...rest] = received.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body: JSON.parse(rest.join('\r\n\r\n')) };
}

describe('the public edge', () => {
  let h: Harness;
  let port: number;

  beforeAll(async () => {
    h = await Harness.open({ REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), CRM_AUTH: 'api-key,oauth2', CRM_OAUTH_CLIENTS: 'crm:crm-secret', CRM_OAUTH_SIGNING_KEYS: 'edge-spec-signing-key-0123456789abcdef' });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.app.server.address() as AddressInfo).port;
  });
  afterAll(() => h.close());

  describe('deadlines', () => {
    const answeredInTime = (result: Exchange) => {
      expect(statusOf(result.received)).toEqual({
        status: 408,
        headers: expect.stringContaining('connection: close'),
        body: { error: expect.stringMatching(/did not arrive in time/), code: 408 },
      });
      expect(result.closedAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(result.closedAfterMs).toBeLessThan(REQUEST_TIMEOUT_MS + CHECK_INTERVAL_MS + 1000);
    };

    it('answers 408 {"error"} and closes a connection whose headers trickle in', async () => {
      const head = `POST /channels/push/single HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nX-Api-Key: test-operator-key\r\nContent-Length: 2\r\n\r\n{}`;
      answeredInTime(await exchange(port, (socket, wrote) => trickle(socket, head, 300, wrote)));
    });

    it('answers 408 {"error"} and closes a connection whose body trickles in, on a CRM route and on an open one', async () => {
      const body = JSON.stringify({ type: 'delivered', token: 'x'.repeat(200) });
      const requests = [
        `POST /channels/push/batch HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nX-Api-Key: test-operator-key\r\nContent-Length: ${body.length}\r\n\r\n`,
        `POST /v1/push/${randomUUID()}/events HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      ];
      const results = await Promise.all(
        requests.map((head) =>
          exchange(port, (socket, wrote) => {
            socket.write(head);
            trickle(socket, body, 300, wrote);
          }),
        ),
      );
      results.forEach(answeredInTime);
    });

    it('closes a connection that sends nothing', async () => {
      const result = await exchange(port, () => undefined);
      // The idle deadline, as long as the request's, closes it before Node looks for late requests.
      expect(result.received).toBe('');
      expect(result.closedAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(result.closedAfterMs).toBeLessThan(REQUEST_TIMEOUT_MS + CHECK_INTERVAL_MS + 1000);
    });

    it('keeps an idle connection between two requests for the keep-alive timeout, not the request deadline', async () => {
      const socket = net.connect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (chunk) => (received += chunk.toString('latin1')));
      socket.write('GET /health/live HTTP/1.1\r\nHost: gateway\r\n\r\n');
      await new Promise((resolve) => setTimeout(resolve, REQUEST_TIMEOUT_MS + CHECK_INTERVAL_MS + 500));
      expect(socket.destroyed).toBe(false);
      socket.write('GET /health/live HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n');
      await new Promise((resolve) => socket.on('close', resolve));
      expect(received.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(2);
    });

    it('sets the defaults on the server: 10 s for the headers, 30 s for the whole request, 72 s of keep-alive', async () => {
      const defaults = await Harness.open();
      try {
        const server = defaults.app.server;
        expect({ headers: server.headersTimeout, request: server.requestTimeout, idle: server.timeout, keepAlive: server.keepAliveTimeout }).toEqual({
          headers: HEADERS_TIMEOUT_MS,
          request: 30_000,
          idle: 30_000,
          keepAlive: KEEP_ALIVE_TIMEOUT_MS,
        });
      } finally {
        await defaults.close();
      }
    });
  });

  describe('nothing is read before it is authorised', () => {
    const FIVE_MIB = 5 * 1024 * 1024;
    /** Sends the head of a request announcing a 5 MiB body, and 1 KiB of that body; never the rest. */
    const announcing = (method: string, url: string, headers = '') => (socket: net.Socket, wrote: (bytes: number) => void) => {
      socket.write(`${method} ${url} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n${headers}Content-Length: ${FIVE_MIB}\r\n\r\n`);
      socket.write('['.repeat(1024));
      wrote(1024);
    };
    const answeredUnread = (result: Exchange, status: number) => {
      expect(statusOf(result.received)).toMatchObject({ status, headers: expect.stringContaining('connection: close') });
      // Answered and closed at once, not after waiting for the body until the request deadline.
      expect(result.closedAfterMs).toBeLessThan(REQUEST_TIMEOUT_MS - 500);
    };

    it('answers a 5 MiB body to a path no route has 404 from its headers, and closes rather than read it', async () => {
      const result = await exchange(port, announcing('POST', '/x'));
      answeredUnread(result, 404);
      expect(statusOf(result.received).body).toEqual({ error: 'no route for POST /x', code: 404 });
    });

    it('answers a 5 MiB body to a known path with a wrong method 405 with Allow, unread', async () => {
      const result = await exchange(port, announcing('PUT', '/channels/push/single'));
      answeredUnread(result, 405);
      expect(statusOf(result.received).headers).toMatch(/allow: .*post/);
      const paramPath = await exchange(port, announcing('PATCH', '/v1/players/someone/devices'));
      answeredUnread(paramPath, 405);
      expect(statusOf(paramPath.received).headers).toMatch(/allow: .*get/);
    });

    it('stops a chunked body to an unrouted path at once', async () => {
      const result = await exchange(port, (socket, wrote) => streamChunked(socket, `POST /nowhere HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n`, wrote));
      expect(statusOf(result.received)).toMatchObject({ status: 404, headers: expect.stringContaining('connection: close') });
      expect(result.sentBeforeAnswer).toBeLessThan(32 * 1024);
    });

    it('answers 401 to a 5 MiB body without credentials, or with wrong ones, unread', async () => {
      answeredUnread(await exchange(port, announcing('POST', '/channels/push/batch')), 401);
      answeredUnread(await exchange(port, announcing('POST', '/bonus/credit/funds', 'X-Api-Key: wrong\r\n')), 401);
      answeredUnread(await exchange(port, announcing('POST', '/v1/devices', 'X-Api-Key: wrong\r\n')), 401);
    });

    it('does not parse the body of an unrouted request, and keeps the connection of a small one', async () => {
      const response = await h.app.inject({ method: 'POST', url: '/x', headers: { 'content-type': 'application/json' }, payload: '{"not json' });
      expect({ status: response.statusCode, connection: response.headers.connection }).toEqual({ status: 404, connection: 'keep-alive' });
      const wrongMethod = await h.app.inject({ method: 'DELETE', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '{"not json' });
      expect({ status: wrongMethod.statusCode, allow: wrongMethod.headers.allow }).toEqual({ status: 405, allow: 'GET, HEAD, POST' });
    });

    it('reads a body larger than the open routes take only on the routes whose credentials have passed', async () => {
      const big = JSON.stringify({ user_id: 'x'.repeat(64 * 1024) });
      expect((await h.app.inject({ method: 'POST', url: '/v1/devices', headers: { 'content-type': 'application/json', 'x-api-key': INTERNAL_KEY }, payload: big })).statusCode).toBe(400);
      expect((await h.post('/bonus/credit/funds', big)).statusCode).toBe(400);
    });
  });

  describe(`bodies of the routes open without a key: ${OPEN_ROUTE_BODY_LIMIT_BYTES} bytes`, () => {
    const tooLarge = { error: `request body is larger than ${OPEN_ROUTE_BODY_LIMIT_BYTES} bytes`, code: 413 };
    const events = () => `/v1/push/${randomUUID()}/events`;
    const open: [string, () => string, string, (bytes: number) => string][] = [
      ['a device event', events, 'application/json', (bytes) => JSON.stringify({ type: 'delivered', token: 'x'.repeat(bytes) })],
      ['a JSON token request', () => '/oauth/token', 'application/json', (bytes) => JSON.stringify({ grant_type: 'client_credentials', scope: 'x'.repeat(bytes) })],
      ['a form token request', () => '/oauth/token', 'application/x-www-form-urlencoded', (bytes) => `grant_type=client_credentials&scope=${'x'.repeat(bytes)}`],
    ];

    it.each(open)('refuses %s of 64 KiB with 413 {"error"}', async (_name, url, contentType, body) => {
      const response = await h.app.inject({ method: 'POST', url: url(), headers: { 'content-type': contentType }, payload: body(64 * 1024) });
      expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 413, body: tooLarge });
    });

    it.each(open)('still reads %s just under the limit', async (_name, url, contentType, body) => {
      const response = await h.app.inject({ method: 'POST', url: url(), headers: { 'content-type': contentType }, payload: body(OPEN_ROUTE_BODY_LIMIT_BYTES - 100) });
      expect(response.statusCode).not.toBe(413);
      expect(response.statusCode).toBeLessThan(500);
    });

    it.each(open)('refuses %s from its Content-Length alone, before any of the body is sent', async (_name, url, contentType) => {
      const result = await exchange(port, (socket) => socket.write(`POST ${url()} HTTP/1.1\r\nHost: gateway\r\nContent-Type: ${contentType}\r\nContent-Length: 65536\r\n\r\n`));
      expect(statusOf(result.received)).toEqual({ status: 413, headers: expect.stringContaining('connection: close'), body: tooLarge });
      expect(result.closedAfterMs).toBeLessThan(1000);
    });

    it.each(open)('stops reading %s streamed without Content-Length once it is past the limit', async (_name, url, contentType) => {
      const result = await exchange(port, (socket, wrote) => streamChunked(socket, `POST ${url()} HTTP/1.1\r\nHost: gateway\r\nContent-Type: ${contentType}\r\n`, wrote));
      expect(statusOf(result.received)).toEqual({ status: 413, headers: expect.stringContaining('connection: close'), body: tooLarge });
      // Answered and closed while the client was still sending: a few KiB were read, not the MiB it had.
      expect(result.sentBeforeAnswer).toBeGreaterThan(OPEN_ROUTE_BODY_LIMIT_BYTES);
      expect(result.sentBeforeAnswer).toBeLessThan(32 * 1024);
    });

    it('refuses a CORS preflight with a body over the limit too', async () => {
      const response = await h.app.inject({ method: 'OPTIONS', url: events(), headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ x: 'x'.repeat(64 * 1024) }) });
      expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 413, body: tooLarge });
    });

    it('leaves the CRM routes at BODY_LIMIT_BYTES', async () => {
      const batch = JSON.stringify([{ title: 'x'.repeat(64 * 1024) }]);
      const response = await h.post('/channels/push/batch', batch);
      expect(response.statusCode).toBe(200);
      expect(response.json().failed).toHaveLength(1);
    });
  });
});
