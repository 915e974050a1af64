import net, { type AddressInfo } from 'node:net';
import { DEVICE_KEY, OPERATOR_KEY, pushRequest, uniqueBrandId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// Every refusal, whoever makes it (a route, the error handler, the router, Fastify's parser, Node's
// HTTP parser), is the CRM vendor's error shape: {"error": string, "code": integer}, nothing else
// (operator-api/error_handling.schema.json), with code the HTTP status.

const BODY_LIMIT_BYTES = 4096;
const REQUEST_TIMEOUT_MS = 1500;

/** The vendor's schema, checked by hand: exactly the two fields, of their types, code the status. */
function expectCrmError(status: number, text: string) {
  const body = JSON.parse(text);
  expect({ status, keys: Object.keys(body).sort(), error: typeof body.error, code: body.code }).toEqual({ status, keys: ['code', 'error'], error: 'string', code: status });
  expect(body.error.length).toBeGreaterThan(0);
}

/** Writes `head` on a raw connection, then with `trickle` a space every 200 ms; answers the status and body. */
function raw(port: number, head: string, trickle = false): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [status, ...rest] = received.split('\r\n\r\n');
      resolve({ status: Number(status.split(' ')[1]), body: rest.join('\r\n\r\n') });
    });
    socket.write(head);
    if (!trickle) return;
    const timer = setInterval(() => socket.writable && socket.write(' '), 200);
    socket.on('close', () => clearInterval(timer));
  });
}

describe('error answers', () => {
  let h: Harness;
  let port: number;

  beforeAll(async () => {
    h = await Harness.open({ BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES), REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.app.server.address() as AddressInfo).port;
  });
  afterAll(() => h.close());

  it('are {error, code} from the routes and the error handler', async () => {
    const brand = uniqueBrandId();
    const answers = [
      await h.single({ title: 'no activity' }),
      await h.post('/channels/push/single', '{"activity": '),
      await h.single(pushRequest(brand, 'p'), { 'x-api-key': 'wrong' }),
      await h.app.inject({ method: 'GET', url: '/v1/credits', headers: { 'x-api-key': DEVICE_KEY } }),
      await h.app.inject({ method: 'GET', url: '/nowhere' }),
      await h.single(pushRequest(brand, uniqueName('nobody'))),
      await h.single({ ...pushRequest(brand, 'p'), body: 'x'.repeat(BODY_LIMIT_BYTES) }),
      await h.app.inject({ method: 'GET', url: `/channels/push/${'x'.repeat(20_000)}` }),
    ];
    expect(answers.map((answer) => answer.statusCode)).toEqual([400, 400, 401, 403, 404, 404, 413, 414]);
    for (const answer of answers) expectCrmError(answer.statusCode, answer.body);
  });

  it('are {error, code} for a method a path does not take', async () => {
    const answer = await h.app.inject({ method: 'PUT', url: '/channels/push/single', headers: { 'content-type': 'application/json' }, payload: '{}' });
    expect(answer.statusCode).toBe(405);
    expectCrmError(405, answer.body);
  });

  it('are {error, code} for a credit key reused for another credit (409)', async () => {
    const headers = { 'X-Service-Id': uniqueName('svc') };
    expect((await h.post('/bonus/credit/funds', { user_id: uniqueName('p'), amount: 5, currency: 'EUR' }, headers)).statusCode).toBe(200);
    const reused = await h.post('/bonus/credit/funds', { user_id: uniqueName('p'), amount: 250, currency: 'EUR' }, headers);
    expect(reused.statusCode).toBe(409);
    expectCrmError(409, reused.body);
  });

  it("are {error, code} from Node's own HTTP parser and deadlines", async () => {
    const noHost = await raw(port, 'GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n');
    const hugeHeaders = await raw(port, `GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'y'.repeat(20_000)}\r\n\r\n`);
    const garbage = await raw(port, 'NOT HTTP AT ALL\r\n\r\n');
    const late = await raw(port, `POST /channels/push/single HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${OPERATOR_KEY}\r\nContent-Length: 100\r\n\r\n{"a"`, true);
    expect([noHost.status, hugeHeaders.status, garbage.status, late.status]).toEqual([400, 431, 400, 408]);
    for (const answer of [noHost, hugeHeaders, garbage, late]) expectCrmError(answer.status, answer.body);
  });
});
