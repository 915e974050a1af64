import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DueEvent, PushEventRow } from '@operator/db';
import { FakeCrm, freePort } from '@operator/testing';
import { createPoster, type Poster, type PosterOptions, type Publish } from './poster';
import { verifySignature } from './signature';

// The poster alone, against a local receiver over a real socket: what it sends for an event and
// what each answer comes to. Events are built in memory; nothing is read from or written to a database.

const SECRET = 'whsec-poster-secret';

const event = (overrides: Partial<DueEvent> = {}): DueEvent => ({
  id: randomUUID(),
  topic: 'bonus',
  orderingKey: 'player-1',
  seq: '1',
  pushId: null,
  status: 'credited',
  error: null,
  body: `{"n":${Math.floor(Math.random() * 1e6)}}`,
  occurredAt: new Date(),
  attempts: 0,
  expiresAt: null,
  source: 'range',
  blocked: false,
  push: null,
  ...overrides,
});

describe('poster (a receiver over HTTP)', () => {
  let crm: FakeCrm;
  const posters: Poster[] = [];

  beforeAll(async () => {
    crm = await FakeCrm.start();
  });
  afterAll(() => crm.close());
  beforeEach(() => crm.reset().clear());
  afterEach(async () => {
    await Promise.all(posters.splice(0).map((poster) => poster.close()));
  });

  function poster(overrides: Partial<PosterOptions> = {}): Poster {
    const made = createPoster({
      urls: { bonus: crm.url('/v1/integration/bonus'), 'push.status': crm.url('/webhooks/push-status'), balance: undefined },
      secret: SECRET,
      auth: {},
      timeoutMs: 300,
      concurrency: 4,
      maxAgeMs: 3_600_000,
      backoffMs: 20,
      maxBackoffMs: 200,
      ...overrides,
    });
    posters.push(made);
    return made;
  }

  it("posts the event's body as is, signed, with the configured credentials, to its topic's URL", async () => {
    const sent = event({ body: '{ "player" : "p-1",  "amount": 1.0 }' });
    const results = await poster({ auth: { basic: { username: 'crm', password: 'p:ss' }, apiKey: { header: 'X-Api-Key', value: 'k-1' } } }).dispatch([sent]);
    expect(results).toEqual([{ event: sent, outcome: 'delivered' }]);
    const [request] = crm.received;
    expect(request).toMatchObject({ method: 'POST', path: '/v1/integration/bonus', body: sent.body });
    expect(request.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'crm-operator-api/webhook',
      authorization: `Basic ${Buffer.from('crm:p:ss').toString('base64')}`,
      'x-api-key': 'k-1',
    });
    expect(verifySignature(SECRET, request.body, request.headers['x-signature'] as string)).toBe(true);
  });

  it('delivers only the topics it has a URL or a publisher for', () => {
    const publish: Publish = async () => ({ ok: true });
    expect(poster().topics).toEqual(['bonus', 'push.status']);
    expect(poster({ urls: { 'push.status': crm.url() }, publishers: { bonus: publish, balance: publish } }).topics).toEqual(['push.status', 'bonus', 'balance']);
  });

  it('retries 5xx, 408 and 429 (no sooner than its Retry-After) with backoff, and sends the rest to the dead letters with their reason', async () => {
    crm.answer(500, 503, 408, { status: 429, headers: { 'Retry-After': '2' } }, { status: 400, body: '{"message":"bad player"}' }, 404);
    const posting = poster();
    const outcomes = [];
    for (let i = 0; i < 6; i++) {
      const before = Date.now();
      const [result] = await posting.dispatch([event({ attempts: 2 })]);
      const next = result.outcome === 'retry' ? result.nextAttemptAt.getTime() : NaN;
      // The pause counts from the answer, which came between these two instants.
      outcomes.push({ ...result, most: next - before, least: next - Date.now() });
    }
    expect(outcomes.map((o) => o.outcome)).toEqual(['retry', 'retry', 'retry', 'retry', 'dead', 'dead']);
    expect(outcomes.map((o) => ('error' in o ? o.error : ''))).toEqual(['HTTP 500: scripted 500', 'HTTP 503: scripted 503', 'HTTP 408: scripted 408', 'HTTP 429: scripted 429', 'HTTP 400: bad player', 'HTTP 404: scripted 404']);
    // Third try: 20 * 2^2 ms, jittered over its upper half.
    for (const o of outcomes.slice(0, 3)) expect(o.most).toBeGreaterThanOrEqual(40);
    for (const o of outcomes.slice(0, 3)) expect(o.least).toBeLessThanOrEqual(80);
    expect(outcomes[3].most).toBeGreaterThanOrEqual(2000);
  });

  it('takes a redirect for a refusal and never follows it', async () => {
    const elsewhere = await FakeCrm.start();
    try {
      crm.answer({ status: 307, headers: { Location: elsewhere.url('/steal') } });
      const [result] = await poster().dispatch([event()]);
      expect(result).toMatchObject({ outcome: 'dead', error: expect.stringMatching(/^HTTP 307/) });
      expect(elsewhere.received).toHaveLength(0);
    } finally {
      await elsewhere.close();
    }
  });

  it('retries a receiver slower than the timeout, and one that cannot be reached', async () => {
    crm.answer({ status: 200, delayMs: 600 });
    const [slow] = await poster().dispatch([event()]);
    expect(slow).toMatchObject({ outcome: 'retry', error: 'timeout after 300 ms' });

    const nobody = `http://127.0.0.1:${await freePort()}/v1/integration/bonus`;
    const [refused] = await poster({ urls: { bonus: nobody } }).dispatch([event()]);
    expect(refused).toMatchObject({ outcome: 'retry', error: expect.stringContaining('ECONNREFUSED') });
  });

  it('gives up on an event whose next try would come past its maximum age', async () => {
    crm.respondWith(503);
    const posting = poster({ maxAgeMs: 1000 });
    const [young] = await posting.dispatch([event({ occurredAt: new Date() })]);
    expect(young.outcome).toBe('retry');
    // Its end is 5 ms away, under the least first backoff (half of backoffMs' 20).
    const [old] = await posting.dispatch([event({ occurredAt: new Date(Date.now() - 995) })]);
    expect(old).toEqual(expect.objectContaining({ outcome: 'dead', error: 'HTTP 503: scripted 503; gave up after the maximum age' }));
    // A redriven dead letter carries its own end.
    const [redriven] = await posting.dispatch([event({ occurredAt: new Date(Date.now() - 86_400_000), expiresAt: new Date(Date.now() + 60_000) })]);
    expect(redriven.outcome).toBe('retry');
  });

  it('posts status events together as one array, whose answer is every one of theirs', async () => {
    const posting = poster({ statusBatchMax: 3 });
    const statuses = [1, 2, 3].map((n) => event({ topic: 'push.status', orderingKey: `push-${n}`, body: `{"event":${n}}` }));
    expect(posting.batchMax(statuses[0])).toBe(3);
    expect(posting.batchMax(event())).toBe(1);

    expect((await posting.dispatch(statuses)).map((r) => r.outcome)).toEqual(['delivered', 'delivered', 'delivered']);
    const [batch] = crm.received;
    expect(batch.body).toBe('[{"event":1},{"event":2},{"event":3}]');
    expect(verifySignature(SECRET, batch.body, batch.headers['x-signature'] as string)).toBe(true);

    crm.answer(503);
    expect((await posting.dispatch(statuses)).map((r) => r.outcome)).toEqual(['retry', 'retry', 'retry']);
    // One alone, and without a maximum, goes as an object.
    await poster().dispatch([statuses[0]]);
    expect(crm.received[2].body).toBe('{"event":1}');
    expect(poster().batchMax(statuses[0])).toBe(1);
  });

  it('refuses arrays with the conversion format, which takes one conversion per call', () => {
    expect(() => poster({ statusBatchMax: 2, statusFormat: { format: 'conversion', deliveredOn: 'provider' } })).toThrow(/event format/);
  });

  it('posts nothing for an event without a body, nor for a status its format does not post', async () => {
    const conversion = poster({ statusFormat: { format: 'conversion', deliveredOn: 'device' } });
    const push = (status: string) => ({ status, meta: '{"c":1}' }) as unknown as PushEventRow;
    const [empty, sent] = await conversion.dispatch([event({ body: null }), event({ topic: 'push.status', body: null, push: push('sent') })]);
    const [opened] = await conversion.dispatch([event({ topic: 'push.status', body: null, push: push('opened') })]);
    expect(empty).toMatchObject({ outcome: 'dead', error: 'event has no body and no push' });
    expect(sent.outcome).toBe('delivered');
    expect(opened.outcome).toBe('delivered');
    expect(crm.received.map((request) => request.body)).toEqual(['{"action":"read","metadata":{"c":1}}']);
  });

  it("publishes a published topic's events instead of posting them, and takes the publisher's outcome", async () => {
    const published: string[] = [];
    const publish: Publish = async (sent, body) => {
      published.push(`${sent.id} ${body}`);
      return published.length === 1 ? { ok: true } : { ok: false, retry: false, error: 'no queue bound', retryAfterMs: 0 };
    };
    const posting = poster({ urls: {}, publishers: { bonus: publish } });
    const [first, second] = [event(), event()];
    expect(await posting.dispatch([first])).toEqual([{ event: first, outcome: 'delivered' }]);
    expect(await posting.dispatch([second])).toEqual([{ event: second, outcome: 'dead', error: 'no queue bound' }]);
    expect(published).toEqual([`${first.id} ${first.body}`, `${second.id} ${second.body}`]);
    expect(crm.received).toHaveLength(0);
  });
});

describe('poster with pipelining (a receiver that takes pipelined requests)', () => {
  const posters: Poster[] = [];
  const servers: http.Server[] = [];
  afterEach(async () => {
    await Promise.all(posters.splice(0).map((poster) => poster.close()));
    const open = servers.splice(0);
    const closed = open.map((server) => new Promise((done) => server.close(done)));
    for (const server of open) server.closeAllConnections();
    await Promise.all(closed);
  });

  /**
   * A receiver that holds its answers until `seen.hold` requests wait, then answers them (and
   * every later one at once); with `seen.close`, the first of them with `Connection: close`,
   * after which the server drops the requests pipelined behind it on that connection.
   */
  async function receiver() {
    const seen = { hold: 1, close: false, connections: 0, bodies: [] as string[], signed: true };
    const waiting: http.ServerResponse[] = [];
    const server = http.createServer({ keepAliveTimeout: 10_000 }, (request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        seen.bodies.push(body);
        seen.signed &&= verifySignature(SECRET, body, request.headers['x-signature'] as string);
        waiting.push(response);
        if (waiting.length < seen.hold) return;
        seen.hold = 1;
        for (const held of waiting.splice(0)) {
          if (seen.close) held.setHeader('connection', 'close');
          seen.close = false;
          held.end('ok');
        }
      });
    });
    server.on('connection', () => (seen.connections += 1));
    servers.push(server);
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/bonus`;
    const made = createPoster({ urls: { bonus: url }, secret: SECRET, auth: {}, timeoutMs: 5000, concurrency: 4, pipelining: 4, maxAgeMs: 3_600_000, backoffMs: 20, maxBackoffMs: 200 });
    posters.push(made);
    return { poster: made, seen };
  }

  const fourKeys = () => ['a', 'b', 'c', 'd'].map((orderingKey) => event({ orderingKey }));

  it('writes posts of different events one after the other on one kept connection', async () => {
    const { poster, seen } = await receiver();
    // The first post opens the connection; the next four are all written before any is answered.
    await poster.dispatch([event()]);
    seen.bodies.length = 0;
    seen.hold = 4;
    const events = fourKeys();
    const results = await Promise.all(events.map((each) => poster.dispatch([each])));
    expect(results.flat().map((result) => result.outcome)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    expect(seen.connections).toBe(1);
    expect(seen.bodies.sort()).toEqual(events.map((each) => each.body).sort());
    expect(seen.signed).toBe(true);
  });

  it('delivers the posts pipelined behind one whose answer closes the connection', async () => {
    const { poster, seen } = await receiver();
    await poster.dispatch([event()]);
    seen.hold = 4;
    seen.close = true;
    const events = fourKeys();
    // Each comes to delivered, or to a retry that is posted again (as the dispatcher does).
    const delivered = await Promise.all(
      events.map(async (each) => {
        for (let attempt = 0; attempt < 5; attempt++) {
          const [result] = await poster.dispatch([each]);
          if (result.outcome === 'delivered') return each.body;
        }
        return undefined;
      }),
    );
    expect(delivered.sort()).toEqual(events.map((each) => each.body).sort());
    expect(seen.connections).toBeGreaterThan(1);
  });
});
