import { generateKeyPairSync } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import apn from '@parse/node-apn';
import http2 from 'node:http2';
import { NODE_APN_VERSION, patchNodeApn, shutdownProvider, UNREADABLE_ANSWER } from './node-apn-patches';

// node-apn-patches.ts reaches into @parse/node-apn's lib/client.js. These checks fail, naming that
// file, when the installed node-apn is not the one it was written against or when what it relies
// on has moved; some also say when node-apn has fixed what a patch makes up for.

const PATCHES = 'libs/provider-apns/src/node-apn-patches.ts';

function expectNodeApn(holds: boolean, what: string): void {
  if (!holds) throw new Error(`${PATCHES} was written against @parse/node-apn ${NODE_APN_VERSION}, and ${what}. Re-read node_modules/@parse/node-apn/lib/client.js and update or remove the patch there.`);
}

type Failure = { status?: unknown; retryAfter?: unknown; retryAfterHeader?: unknown; error?: { message?: string } };
type Client = {
  request: (...args: unknown[]) => Promise<unknown>;
  retryRequest: (...args: unknown[]) => Promise<unknown>;
  session?: { constructor: { name: string }; destroyed: boolean; closed: boolean } | null;
};

const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
const providers: apn.Provider[] = [];

function makeProvider(port = 443): apn.Provider {
  const provider = new apn.Provider({ token: { key, keyId: 'KEYID12345', teamId: 'TEAMID1234' }, production: false, address: 'localhost', port, connectionRetryLimit: 0 });
  providers.push(provider);
  return provider;
}

const clientOf = (provider: apn.Provider) => (provider as unknown as { client?: Client }).client;

function parameters(fn: (...args: never[]) => unknown): string[] {
  const list = /^[^(]*\(([^)]*)\)/.exec(fn.toString())?.[1] ?? '';
  return list
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
}

const rejection = (pending: Promise<unknown>) => pending.then(() => undefined, (failure: Failure) => failure);

/**
 * What Client#request sends to: one stream that answers `status` with `headers` and the body in
 * `pieces` (one every `everyMs`), then ends unless told not to. `closed` lists the codes it was
 * closed with.
 */
function answering(status: number, pieces: string[], options: { headers?: Record<string, string>; end?: boolean; everyMs?: number } = {}) {
  const closed: number[] = [];
  const stream = Object.assign(new EventEmitter(), {
    setEncoding() {},
    write() {},
    setTimeout() {},
    close(code: number) {
      closed.push(code);
    },
    end() {
      setImmediate(async () => {
        stream.emit('response', { ':status': status, ...options.headers });
        for (const piece of pieces) {
          if (closed.length > 0) return;
          stream.emit('data', piece);
          if (options.everyMs) await new Promise((resolve) => setTimeout(resolve, options.everyMs));
        }
        if (options.end !== false) stream.emit('end');
      });
    },
  });
  return { request: () => stream, closed };
}

/** One stream that answers 429 with a Retry-After header. */
const answering429 = () => answering(429, ['{"reason":"TooManyRequests"}'], { headers: { 'retry-after': '7' } });

const notification = { headers: {}, body: '{}' };

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

afterAll(async () => {
  await Promise.all(providers.map((provider) => shutdownProvider(provider, 1000)));
});

describe('the @parse/node-apn internals node-apn-patches.ts relies on', () => {
  it(`is version ${NODE_APN_VERSION}, installed and pinned exactly in package.json`, () => {
    const installed = JSON.parse(readFileSync(require.resolve('@parse/node-apn/package.json'), 'utf8')).version;
    const pinned = JSON.parse(readFileSync(join(__dirname, '../../../package.json'), 'utf8')).dependencies['@parse/node-apn'];
    expectNodeApn(installed === NODE_APN_VERSION, `${installed} is installed`);
    expectNodeApn(pinned === NODE_APN_VERSION, `package.json asks for "${pinned}"`);
  });

  it('has a client whose request and retryRequest take the arguments the patches expect', () => {
    const client = clientOf(makeProvider());
    expectNodeApn(typeof client?.request === 'function', 'Provider#client.request is not a function');
    expectNodeApn(typeof client?.retryRequest === 'function', 'Provider#client.retryRequest is not a function');
    const request = parameters(client!.request);
    const retryRequest = parameters(client!.retryRequest);
    expectNodeApn(request.join() === 'session,address,notification,path,httpMethod', `Client#request now takes (${request.join(', ')})`);
    expectNodeApn(retryRequest.join() === 'error,session,address,notification,path,httpMethod,count', `Client#retryRequest now takes (${retryRequest.join(', ')})`);
  });

  it('calls session.request( synchronously in Client#request, and still reads the header as Retry-After', () => {
    const source = clientOf(makeProvider())!.request.toString();
    const call = source.indexOf('session.request(');
    const firstAwait = source.search(/\bawait\b/);
    expectNodeApn(call >= 0, 'Client#request no longer calls session.request(');
    expectNodeApn(firstAwait < 0 || call < firstAwait, 'Client#request now awaits before session.request(, so the temporary wrapper would miss the call');
    expectNodeApn(
      source.includes("headers['Retry-After']"),
      "Client#request no longer reads headers['Retry-After']: if it now reads 'retry-after' and Client#write keeps retryAfter on failures, the retryAfterHeader patch can go",
    );
  });

  it('loses Retry-After without the patch, and keeps it with it', async () => {
    const provider = makeProvider();
    const client = clientOf(provider)!;
    const plain = await rejection(client.request(answering429(), 'localhost', notification, '/3/device/abcd', 'POST'));
    expectNodeApn(plain?.status === 429, `Client#request rejected a 429 with ${JSON.stringify(plain)}`);
    expectNodeApn(plain?.retryAfter === undefined, 'Client#request now reads Retry-After itself: if Client#write keeps it on failures, the retryAfterHeader patch can go');

    expect(patchNodeApn(provider)).toEqual({ retryAfterHeader: true, retryableAnswers: true, boundedAnswers: true, announcedStreams: true });
    const session = answering429();
    const request = session.request;
    const patched = await rejection(client.request(session, 'localhost', notification, '/3/device/abcd', 'POST'));
    expect(patched).toMatchObject({ status: 429, retryAfterHeader: '7', response: { reason: 'TooManyRequests' } });
    expect(session.request).toBe(request);
  });

  it("throws 'client session is either closed or destroyed' from retryRequest for a closed session, unless patched", async () => {
    const provider = makeProvider();
    const client = clientOf(provider)!;
    const answer = { status: 429, response: { reason: 'TooManyRequests' } };
    const args = [{ closed: true }, 'localhost', notification, '/3/device/abcd', 'POST', 0];
    const plain = await rejection(client.retryRequest(answer, ...args));
    expectNodeApn(plain !== answer, 'Client#retryRequest now rethrows the answer for a closed session: the retryableAnswers patch can go');
    expectNodeApn(
      plain?.error?.message === 'client session is either closed or destroyed' && plain.status === undefined,
      `Client#retryRequest threw ${JSON.stringify(plain)} for a closed session`,
    );

    patchNodeApn(provider);
    expect(await rejection(client.retryRequest(answer, ...args))).toBe(answer);
  });

  it('waits for the end of an answer that trickles for ever, unless patched: then it is cancelled at the deadline', async () => {
    const provider = makeProvider();
    const client = clientOf(provider)!;
    const trickle = () => answering(200, Array.from({ length: 1000 }, () => ' '), { everyMs: 10, end: false });
    const plainSession = trickle();
    const plain = await Promise.race([
      client.request(plainSession, 'localhost', notification, '/3/device/abcd', 'POST').then(
        () => 'answered',
        () => 'failed',
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve('waiting'), 300)),
    ]);
    plainSession.closed.push(http2.constants.NGHTTP2_CANCEL);
    expectNodeApn(plain === 'waiting', `Client#request ${plain} an answer that never ends: if it now bounds the whole exchange itself, the boundedAnswers patch can go`);

    patchNodeApn(provider, { deadlineMs: 100 });
    const session = trickle();
    const started = Date.now();
    const failure = await rejection(client.request(session, 'localhost', notification, '/3/device/abcd', 'POST'));
    expect(failure?.error?.message).toBe('no complete answer within 100 ms');
    expect(Date.now() - started).toBeLessThan(250);
    expect(session.closed).toEqual([http2.constants.NGHTTP2_CANCEL]);
  });

  it('reads an answer of any size, unless patched: then it stops at maxAnswerBytes', async () => {
    const provider = makeProvider();
    const client = clientOf(provider)!;
    const huge = () => answering(400, Array.from({ length: 64 }, () => 'x'.repeat(1024)));
    const plain = await rejection(client.request(huge(), 'localhost', notification, '/3/device/abcd', 'POST'));
    expectNodeApn(plain?.status === undefined && /Unexpected error processing APNs response/.test(plain?.error?.message ?? ''), `Client#request rejected 64 KiB of x with ${JSON.stringify(plain)}`);

    patchNodeApn(provider, { maxAnswerBytes: 1024 });
    const session = huge();
    const failure = await rejection(client.request(session, 'localhost', notification, '/3/device/abcd', 'POST'));
    expect(failure).toMatchObject({ status: 400, error: { message: 'an answer longer than 1024 bytes' } });
    expect(session.closed).toEqual([http2.constants.NGHTTP2_CANCEL]);
    // A 2xx is APNs' acceptance, whatever follows it.
    const accepted = answering(200, ['x'.repeat(2048)], { headers: { 'apns-id': 'the-id' } });
    await expect(client.request(accepted, 'localhost', notification, '/3/device/abcd', 'POST')).resolves.toEqual({ 'apns-id': 'the-id' });
  });

  it(`fails an answer that is not JSON with "${UNREADABLE_ANSWER}: <the parse error>", and keeps APNs' reason as sent, unless patched`, async () => {
    const provider = makeProvider();
    const client = clientOf(provider)!;
    const page = () => answering(502, ['<html>secret-token</html>']);
    const markup = () => answering(400, [JSON.stringify({ reason: '<b>Bad</b>\u001b[31m' })]);
    const plainPage = await rejection(client.request(page(), 'localhost', notification, '/3/device/abcd', 'POST'));
    // After node-apn's words comes V8's parse error, which quotes the start of the body.
    expectNodeApn(plainPage?.error?.message?.startsWith(`${UNREADABLE_ANSWER}: `) === true, `Client#request rejected a page that is not JSON with ${JSON.stringify(plainPage)}`);
    const plainMarkup = (await rejection(client.request(markup(), 'localhost', notification, '/3/device/abcd', 'POST'))) as { response?: { reason?: string } };
    expectNodeApn(plainMarkup?.response?.reason === '<b>Bad</b>\u001b[31m', `Client#request rejected a 400 with ${JSON.stringify(plainMarkup)}`);

    patchNodeApn(provider);
    const patchedPage = await rejection(client.request(page(), 'localhost', notification, '/3/device/abcd', 'POST'));
    expect(patchedPage).toMatchObject({ error: { message: 'APNs answered 502 with a body that is not JSON' } });
    expect(patchedPage).not.toHaveProperty('status');
    const patchedMarkup = (await rejection(client.request(markup(), 'localhost', notification, '/3/device/abcd', 'POST'))) as { status?: number; response?: { reason?: string } };
    expect(patchedMarkup).toMatchObject({ status: 400, response: { reason: 'b Bad /b [31m' } });
  });

  it("hands the Provider's options to http2.connect, so a createConnection option opens its connection", async () => {
    const port = await freePort();
    const opened: string[] = [];
    const provider = new apn.Provider({
      token: { key, keyId: 'KEYID12345', teamId: 'TEAMID1234' },
      production: false,
      address: 'localhost',
      port: 443,
      connectionRetryLimit: 0,
      createConnection: (authority: URL) => {
        opened.push(authority.href);
        return connect(port, '127.0.0.1');
      },
    } as apn.ProviderOptions);
    providers.push(provider);
    const note = Object.assign(new apn.Notification(), { rawPayload: { aps: {} }, topic: 'com.example.app' });
    const { failed } = await provider.send(note, 'abcd');
    expectNodeApn(opened.length === 1, `Client#connect no longer opens its connection with the createConnection option (opened ${JSON.stringify(opened)}): proxiedConnection sends nothing through the proxy`);
    expect(opened).toEqual(['https://localhost/']);
    expect(failed).toHaveLength(1);
  });

  it('makes its session in Client#connect, before the promise connect() answers settles', async () => {
    const client = clientOf(makeProvider(await freePort())) as unknown as { connect?: () => Promise<unknown>; session?: unknown };
    expectNodeApn(typeof client.connect === 'function', 'Provider#client.connect is not a function: announcedStreams hears no SETTINGS');
    await client.connect!();
    expectNodeApn(client.session instanceof EventEmitter, 'Client#connect no longer leaves its session in client.session when it settles');
  });

  it('signs its provider token into client.config.token, renewed once per generation', () => {
    const token = (clientOf(makeProvider()) as unknown as { config?: { token?: { current?: unknown; generation?: unknown; regenerate?: unknown } } }).config?.token;
    expectNodeApn(typeof token?.current === 'string' && typeof token.regenerate === 'function', 'client.config.token no longer holds { current, regenerate }: shareProviderToken shares nothing');
    const first = token!.current;
    (token!.regenerate as (generation: unknown) => void)(Number(token!.generation) + 1);
    expectNodeApn(token!.current === first, 'regenerate() now renews for any generation: connections sharing one token would renew it once each');
  });

  it('holds the HTTP/2 session in client.session, whose shutdown never finishes once it is destroyed', async () => {
    const port = await freePort();
    const note = Object.assign(new apn.Notification(), { rawPayload: { aps: {} }, topic: 'com.example.app' });
    const stuck = makeProvider(port);
    const refused = await stuck.send(note, 'abcd');
    expect(refused.failed).toHaveLength(1);
    const session = clientOf(stuck)!.session;
    expectNodeApn(session?.constructor.name === 'ClientHttp2Session', `client.session is ${session?.constructor.name ?? session} after a send`);
    expectNodeApn(session!.destroyed && !session!.closed, 'a refused connection no longer leaves client.session destroyed but not closed');
    const plainShutdown = await Promise.race([
      new Promise<string>((resolve) => stuck.shutdown(() => resolve('finished'))),
      new Promise<string>((resolve) => setTimeout(() => resolve('waiting'), 300)),
    ]);
    expectNodeApn(plainShutdown === 'waiting', "Provider#shutdown now finishes for a destroyed session: shutdownProvider's forgetting it can go");

    const provider = makeProvider(port);
    await provider.send(note, 'abcd');
    const started = Date.now();
    await shutdownProvider(provider, 5000);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(clientOf(provider)!.session).toBeNull();
  });
});

describe('node-apn-patches.ts without the internals', () => {
  it('patches nothing and says so, and shutdownProvider still resolves after the grace period', async () => {
    const bare = { shutdown: () => undefined } as unknown as apn.Provider;
    expect(patchNodeApn(bare)).toEqual({ retryAfterHeader: false, retryableAnswers: false, boundedAnswers: false, announcedStreams: false });
    const started = Date.now();
    await shutdownProvider(bare, 50);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });
});
