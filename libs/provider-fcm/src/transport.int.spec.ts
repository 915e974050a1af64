import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { FakeFcm, fcmAnswer, fcmToken, pushRequest, startConnectProxy, until, type ConnectProxy, type ConnectProxyOptions } from '@operator/testing';
import type { PushProvider, SendResult, SendTarget } from '@operator/providers';
import { createFcmProvider, type FcmProviderOptions } from './index';

// The provider's transport over real sockets: the operator's proxy (CONNECT tunnels for the token
// request and the HTTP/2 connections), one deadline for a whole send, and a cap on what is read of
// an answer, which is kept as its status and a sanitised reason.

const target = (token = fcmToken()): SendTarget => ({ deliveryId: randomUUID(), token, platform: 'android', p256dh: null, auth: null });
const notification = () => ({ pushId: randomUUID(), request: pushRequest(4242, 'player-7') });
const failure = (result: SendResult) => (result.ok ? null : result.error);

describe('FCM through the operator proxy', () => {
  let fake: FakeFcm;
  let proxy: ConnectProxy | undefined;
  const providers: PushProvider[] = [];
  const closers: (() => void)[] = [];

  /** A provider sending to the fake as FCM_ENDPOINT, through `proxy` unless NO_PROXY says otherwise. */
  const provider = (options: Partial<FcmProviderOptions> = {}) => {
    const made = createFcmProvider({ serviceAccount: fake.serviceAccount, endpoint: `https://127.0.0.1:${fake.port}`, ca: fake.ca, ...options });
    providers.push(made);
    return made;
  };
  const startProxy = async (options: ConnectProxyOptions = {}) => (proxy = await startConnectProxy(options));

  beforeEach(async () => {
    fake = await FakeFcm.start();
  });

  afterEach(async () => {
    await Promise.all(providers.splice(0).map((made) => made.close()));
    await proxy?.close();
    proxy = undefined;
    for (const close of closers.splice(0)) close();
    await fake.close();
  });

  it("asks the proxy for Google's hosts, with its credentials, and sends through the tunnels", async () => {
    // Without FCM_ENDPOINT the provider connects to Google's names; the proxy's DNS sends them to the fake.
    const { port } = fake;
    await startProxy({ credentials: { username: 'egress', password: 'p@ss:w0rd' }, resolve: () => `127.0.0.1:${port}` });
    const own = provider({ endpoint: undefined, proxy: { httpsProxy: proxy!.url } });
    const tokens = [fcmToken(), fcmToken(), fcmToken()];
    const results = await own.send(notification(), tokens.map(target));
    expect(results.filter((result) => !result.ok)).toEqual([]);
    expect(proxy!.targets().sort()).toEqual(['fcm.googleapis.com:443', 'oauth2.googleapis.com:443']);
    // One tunnel for the token request, one for the HTTP/2 connection that carried the three sends.
    expect(proxy!.connections).toHaveLength(2);
    expect(proxy!.refused).toEqual([]);
    expect(fake.tokenGrants.map((grant) => grant.status)).toEqual([200]);
    for (const token of tokens) expect(fake.sendsTo(token).map((sent) => [sent.status, sent.host, sent.httpVersion])).toEqual([[200, 'fcm.googleapis.com', '2.0']]);
  });

  it("asks the proxy for FCM_ENDPOINT's origin, keeping Google's names inside the tunnel", async () => {
    await startProxy();
    const token = fcmToken();
    const [result] = await provider({ proxy: { httpsProxy: proxy!.url } }).send(notification(), [target(token)]);
    expect(result.ok).toBe(true);
    expect(proxy!.targets()).toEqual([`127.0.0.1:${fake.port}`]);
    expect(proxy!.connections).toHaveLength(2);
    expect(fake.tokenGrants).toHaveLength(1);
    expect(fake.sendsTo(token).map((sent) => [sent.status, sent.host])).toEqual([[200, 'fcm.googleapis.com']]);
  });

  it('goes direct to a host NO_PROXY names', async () => {
    await startProxy();
    const [result] = await provider({ proxy: { httpsProxy: proxy!.url, noProxy: 'localhost,127.0.0.1' } }).send(notification(), [target()]);
    expect(result.ok).toBe(true);
    expect(proxy!.connections).toEqual([]);
    expect(fake.tokenGrants).toHaveLength(1);
  });

  it('a proxy refusing the token request (407) is a network error at once, and nothing reaches FCM', async () => {
    await startProxy({ credentials: { username: 'egress', password: 'right' } });
    const started = Date.now();
    const [result] = await provider({ proxy: { httpsProxy: proxy!.url.replace('right', 'wrong') } }).send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('answered 407 to CONNECT') });
    expect(failure(result)!.message).not.toContain('wrong');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(proxy!.refused).toEqual([`127.0.0.1:${fake.port}`]);
    expect(fake.tokenGrants).toEqual([]);
  });

  it('a proxy refusing the HTTP/2 tunnel is a network error at once; the next send goes through once it relents', async () => {
    let refusing = false;
    await startProxy({ refuse: () => refusing });
    const own = provider({ proxy: { httpsProxy: proxy!.url }, timeoutMs: 5000 });
    expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
    refusing = true;
    fake.cutConnections();
    const started = Date.now();
    const [refused] = await own.send(notification(), [target()]);
    expect(failure(refused)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('answered 403 to CONNECT') });
    expect(Date.now() - started).toBeLessThan(1000);
    refusing = false;
    expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
  });

  it('a send waiting for a tunnel the proxy never opens gives up at its deadline', async () => {
    let holding = false;
    await startProxy({ hold: () => holding });
    const own = provider({ proxy: { httpsProxy: proxy!.url }, timeoutMs: 500 });
    expect((await own.send(notification(), [target()]))[0].ok).toBe(true);
    holding = true;
    fake.cutConnections();
    const started = Date.now();
    const [result] = await own.send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('500 ms') });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(proxy!.held).toEqual([`127.0.0.1:${fake.port}`]);
  });

  it('a token request stuck in a tunnel ends the send at its deadline, not the token request', async () => {
    // The proxy opens the tunnel to a server that accepts and never says a word: no TLS handshake.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    closers.push(() => silent.close());
    const silentPort = (silent.address() as net.AddressInfo).port;
    const sockets = new Set<net.Socket>();
    silent.on('connection', (socket) => sockets.add(socket));
    closers.push(() => sockets.forEach((socket) => socket.destroy()));
    await startProxy({ resolve: () => `127.0.0.1:${silentPort}` });
    const started = Date.now();
    const [result] = await provider({ proxy: { httpsProxy: proxy!.url }, timeoutMs: 500 }).send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('no access token within 500 ms') });
    expect(Date.now() - started).toBeLessThan(1500);
  });
});

describe('FCM answers, bounded', () => {
  let fake: FakeFcm;
  let own: PushProvider;

  beforeEach(async () => {
    fake = await FakeFcm.start();
    own = createFcmProvider({ serviceAccount: fake.serviceAccount, endpoint: `https://127.0.0.1:${fake.port}`, ca: fake.ca, timeoutMs: 800 });
  });

  afterEach(async () => {
    await own.close();
    await fake.close();
  });

  it('an answer that never finishes is cancelled at the deadline as a network error', async () => {
    const token = fcmToken();
    fake.respond(token, { status: 200, stall: true });
    const started = Date.now();
    const [result] = await own.send(notification(), [target(token)]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'network', message: expect.stringContaining('800 ms') });
    expect(Date.now() - started).toBeLessThan(2000);
    await until(() => fake.sendsTo(token)[0]?.cancelled, 'the stream to be cancelled');
    // The answer had begun (a byte every 100 ms): the deadline is on the whole answer, not on silence.
    expect(fake.sendsTo(token)[0].answeredBytes).toBeGreaterThan(3);
  });

  it('reads a few KiB of a huge answer, cancels the rest, and keeps its status without its text', async () => {
    const token = fcmToken();
    const total = 64 * 1024 * 1024;
    fake.respond(token, { status: 500, text: '<html>internal path /srv/secret-name ', bodyBytes: total });
    const [result] = await own.send(notification(), [target(token)]);
    expect(failure(result)).toEqual({ class: 'transient', code: 'unavailable', message: "messaging/internal-error (HTTP 500): an answer that is not Google's JSON error" });
    await until(() => fake.sendsTo(token)[0]?.cancelled, 'the stream to be cancelled');
    await new Promise((resolve) => setTimeout(resolve, 100));
    // What the server got out before the cancel: its buffers and HTTP/2's flow-control window, not 64 MiB.
    expect(fake.sendsTo(token)[0].answeredBytes).toBeLessThan(1024 * 1024);
  });

  it('keeps an answer that is not JSON as its status only, and Google messages sanitised and short', async () => {
    const [page, shouting] = [fcmToken(), fcmToken()];
    fake.respond(page, { status: 502, text: '<html><body>Bad gateway: upstream token=sk_live_5x2 at 10.0.3.7</body></html>' });
    fake.respond(shouting, fcmAnswer.error(400, 'INVALID_ARGUMENT', `<script>alert("x")</script>\u001b[31m ${'very long '.repeat(200)}`));
    const [pageResult, shoutingResult] = await own.send(notification(), [target(page), target(shouting)]);
    expect(failure(pageResult)).toEqual({ class: 'transient', code: 'unavailable', message: "messaging/unknown-error (HTTP 502): an answer that is not Google's JSON error" });
    const said = failure(shoutingResult)!;
    expect(said).toMatchObject({ class: 'payload', code: 'payload-invalid', message: expect.stringContaining('(HTTP 400 INVALID_ARGUMENT): script alert( x ) /script') });
    expect(said.message).not.toMatch(/[<>"\u001b]/);
    // The code, the status and at most 240 characters of Google's message.
    expect(said.message.length).toBeLessThan(320);
  });

  it('reads a few KiB of a huge token answer and keeps its status without its text', async () => {
    fake.answerGrants({ status: 503, text: '<html>maintenance, key=AIzaSySecret ', bodyBytes: 64 * 1024 * 1024 });
    const [result] = await own.send(notification(), [target()]);
    expect(failure(result)).toMatchObject({ class: 'transient', code: 'unavailable', message: expect.stringContaining("token request answered 503: an answer that is not Google's JSON error") });
    expect(failure(result)!.message).not.toMatch(/AIza|html/);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fake.tokenGrants[0].answeredBytes).toBeLessThan(1024 * 1024);
  });
});
