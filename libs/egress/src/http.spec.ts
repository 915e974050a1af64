import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { startConnectProxy, testTls, type ConnectProxy } from '@operator/testing';
import { createOutbound, OutboundError, type Outbound } from './http';
import { connectTls } from './tunnel';

type Handler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;

/** An https server on 127.0.0.1 that counts its connections. */
async function server(handler: Handler) {
  const tls = testTls();
  let connections = 0;
  const sockets = new Set<Socket>();
  const instance = https.createServer({ key: tls.key, cert: tls.cert }, handler);
  instance.on('secureConnection', (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => instance.listen(0, '127.0.0.1', resolve));
  const { port } = instance.address() as AddressInfo;
  return {
    origin: `https://127.0.0.1:${port}`,
    port,
    connections: () => connections,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => instance.close(() => resolve()));
    },
  };
}

describe('outbound HTTP', () => {
  const { ca } = testTls();
  let outbound: Outbound;
  const servers: { close(): Promise<void> }[] = [];
  const start = async (handler: Handler) => {
    const started = await server(handler);
    servers.push(started);
    return started;
  };
  beforeEach(() => {
    outbound = createOutbound({ ca });
  });
  afterEach(async () => {
    await outbound.close();
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('takes an answer that came in while the process was busy past the deadline, rather than calling it late', async () => {
    // The server (this process) answers at once, then keeps the event loop busy past the client's
    // deadline: the answer is waiting on the socket when the deadline's timer runs.
    const busy = await start((_req, res) => {
      res.writeHead(201, { location: '/message/1' });
      res.end();
      const until = Date.now() + 1000;
      while (Date.now() < until);
    });
    const answer = await outbound.request({ url: `${busy.origin}/`, timeoutMs: 500, maxBodyBytes: 1024 });
    expect(answer.status).toBe(201);
    expect(answer.headers.location).toBe('/message/1');
  });

  it('gives a request the whole deadline for its answer once it is on a connection, however long the connection took', async () => {
    // A peer slow to take connections (its accept queue full): the TLS handshake waits 600 ms
    // of a 1,000 ms deadline (the rest is for the handshake on a loaded machine), then the answer
    // takes 700 ms more.
    const slow = await start((_req, res) => setTimeout(() => res.writeHead(201).end(), 700));
    const relay = net.createServer((client) => {
      const upstream = net.connect(slow.port, '127.0.0.1');
      client.pause();
      setTimeout(() => {
        client.pipe(upstream).pipe(client);
        client.resume();
      }, 600);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    servers.push({ close: () => new Promise<void>((resolve) => relay.close(() => resolve())) });
    const { port } = relay.address() as AddressInfo;
    const answer = await outbound.request({ url: `https://127.0.0.1:${port}/`, timeoutMs: 1000, maxBodyBytes: 1024 });
    expect(answer.status).toBe(201);

    // And a connection that never comes is given up at the first deadline.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const sockets: Socket[] = [];
    silent.on('connection', (socket) => sockets.push(socket));
    servers.push({ close: () => new Promise<void>((resolve) => { for (const socket of sockets) socket.destroy(); silent.close(() => resolve()); }) });
    const started = Date.now();
    const failure = await outbound.request({ url: `https://127.0.0.1:${(silent.address() as AddressInfo).port}/`, timeoutMs: 300, maxBodyBytes: 1024 }).catch((error) => error);
    expect(failure).toBeInstanceOf(OutboundError);
    expect(failure.message).toBe('no connection within 300 ms');
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('never writes a request given up while it waited for a connection, once one frees', async () => {
    // One connection: the second request waits behind the first, whose answer takes 600 ms, past
    // the second's deadline of 200 ms. When the connection frees, the second must not go out.
    const seen: string[] = [];
    const held = await start((req, res) => {
      seen.push(req.url ?? '');
      if (req.url === '/held') setTimeout(() => res.writeHead(200).end('{}'), 600);
      else res.writeHead(200).end('{}');
    });
    const one = createOutbound({ ca, connectionsPerOrigin: 1 });
    try {
      const first = one.request({ url: `${held.origin}/held`, timeoutMs: 5000, maxBodyBytes: 1024 });
      const second = await one.request({ url: `${held.origin}/given-up`, timeoutMs: 200, maxBodyBytes: 1024 }).catch((error) => error);
      expect(second).toBeInstanceOf(OutboundError);
      expect(second.message).toBe('no connection within 200 ms');
      expect((await first).status).toBe(200);
      // The connection is free again: a request after it goes out on it, and the given-up one never did.
      expect((await one.request({ url: `${held.origin}/after`, timeoutMs: 5000, maxBodyBytes: 1024 })).status).toBe(200);
      expect(seen).toEqual(['/held', '/after']);
    } finally {
      await one.close();
    }
  });

  it('gives up on an answer that trickles, at the deadline for the whole exchange', async () => {
    const trickle = await start((_req, res) => {
      res.writeHead(200);
      const timer = setInterval(() => res.write('x'), 100);
      res.on('close', () => clearInterval(timer));
    });
    const started = Date.now();
    const failure = await outbound.request({ url: `${trickle.origin}/`, timeoutMs: 800, maxBodyBytes: 1024 }).catch((error) => error);
    expect(failure).toBeInstanceOf(OutboundError);
    expect(failure.failure).toBe('timeout');
    // Each byte came well within any idle timeout; the deadline is on the whole exchange.
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('with successWithoutBody, takes a 2xx at its status, whatever its body does next', async () => {
    const trickle = await start((_req, res) => {
      res.writeHead(201, { location: 'https://push.example.test/m/1' });
      const timer = setInterval(() => res.write('x'), 100);
      res.on('close', () => clearInterval(timer));
    });
    const started = Date.now();
    const answer = await outbound.request({ url: `${trickle.origin}/`, timeoutMs: 3000, maxBodyBytes: 1024, successWithoutBody: true });
    expect(answer).toMatchObject({ status: 201, truncated: false });
    expect(answer.headers.location).toBe('https://push.example.test/m/1');
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('reads at most maxBodyBytes of a huge answer and drops the rest', async () => {
    const chunk = Buffer.alloc(1 << 20, 'a');
    let written = 0;
    const huge = await start((_req, res) => {
      res.writeHead(200, { 'content-length': String(200 * chunk.length) });
      const write = () => {
        while (written < 200 * chunk.length) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', write);
        }
        res.end();
      };
      res.on('error', () => undefined);
      write();
    });
    const answer = await outbound.request({ url: `${huge.origin}/`, timeoutMs: 5000, maxBodyBytes: 4096 });
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBe(4096);
    expect(answer.truncated).toBe(true);
    // The sender was cut off long before its 200 MiB.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(written).toBeLessThan(100 * chunk.length);
  });

  it('takes a redirect as the answer: nothing is sent where it points', async () => {
    const target = await start((_req, res) => res.writeHead(200).end('credited'));
    const redirecting = await start((_req, res) => res.writeHead(307, { location: `${target.origin}/steal` }).end());
    const answer = await outbound.request({ url: `${redirecting.origin}/credit`, body: '{}', timeoutMs: 2000, maxBodyBytes: 1024 });
    expect(answer.status).toBe(307);
    expect(target.connections()).toBe(0);
  });

  it('refuses non-public addresses when asked, before any connection', async () => {
    const internal = await start((_req, res) => res.writeHead(200).end());
    for (const url of [`${internal.origin}/`, `https://localhost:${internal.port}/`, `https://[::ffff:127.0.0.1]:${internal.port}/`]) {
      const failure = await outbound.request({ url, timeoutMs: 2000, maxBodyBytes: 1024, publicOnly: true }).catch((error) => error);
      expect(failure).toBeInstanceOf(OutboundError);
      expect(failure.failure).toBe('refused-address');
    }
    expect(internal.connections()).toBe(0);
    // Without the guard (an operator's own endpoint), the same address is reached.
    expect((await outbound.request({ url: `${internal.origin}/`, timeoutMs: 2000, maxBodyBytes: 1024 })).status).toBe(200);
  });

  it('opens every connection with `connect` when given one, keeping the URL\'s host as the name', async () => {
    const hosts: (string | undefined)[] = [];
    const endpoint = await start((req, res) => {
      hosts.push(req.headers.host);
      res.writeHead(200).end('ok');
    });
    const targets: unknown[] = [];
    const own = createOutbound({
      connect: (target) => {
        targets.push(target);
        return tlsConnect({ host: '127.0.0.1', port: endpoint.port, servername: target.servername, ca });
      },
    });
    try {
      for (let round = 0; round < 2; round += 1) {
        const answer = await own.request({ url: 'https://fcm.googleapis.com/token', body: 'x', timeoutMs: 2000, maxBodyBytes: 1024 });
        expect(answer.body.toString()).toBe('ok');
      }
      expect(targets.length).toBeGreaterThan(0);
      for (const target of targets) expect(target).toEqual({ host: 'fcm.googleapis.com', port: 443, servername: 'fcm.googleapis.com' });
      expect(hosts).toEqual(['fcm.googleapis.com', 'fcm.googleapis.com']);
      const refused = createOutbound({ connect: () => tlsConnect({ host: '127.0.0.1', port: endpoint.port, servername: 'unknown.test', ca }) });
      const failure = await refused.request({ url: 'https://unknown.test/', timeoutMs: 2000, maxBodyBytes: 1024 }).catch((error) => error);
      await refused.close();
      expect(failure).toMatchObject({ failure: 'network' });
    } finally {
      await own.close();
    }
  });
});

describe('outbound through a proxy', () => {
  const { ca } = testTls();
  let proxy: ConnectProxy;
  let target: Awaited<ReturnType<typeof server>>;
  beforeAll(async () => {
    target = await server((_req, res) => res.writeHead(200).end('ok'));
  });
  afterAll(() => target.close());
  afterEach(() => proxy?.close());

  it('tunnels https through HTTPS_PROXY with its credentials, and goes direct for NO_PROXY', async () => {
    proxy = await startConnectProxy({ credentials: { username: 'egress', password: 'p@ss' } });
    const outbound = createOutbound({ ca, proxy: { httpsProxy: proxy.url } });
    expect((await outbound.request({ url: `${target.origin}/a`, timeoutMs: 2000, maxBodyBytes: 64 })).body.toString()).toBe('ok');
    expect(proxy.targets()).toEqual([`127.0.0.1:${target.port}`]);
    await outbound.close();

    const bypass = createOutbound({ ca, proxy: { httpsProxy: proxy.url, noProxy: '127.0.0.1' } });
    expect((await bypass.request({ url: `${target.origin}/b`, timeoutMs: 2000, maxBodyBytes: 64 })).status).toBe(200);
    expect(proxy.connections).toHaveLength(1);
    await bypass.close();
  });

  it('sends plain http:// to the proxy in absolute form with its credentials, and https:// through CONNECT, past a proxy that tunnels to 443 only', async () => {
    const plain = http.createServer((req, res) => res.writeHead(200).end(`plain ${req.method} ${req.url} ${req.headers.host} ${req.headers['proxy-authorization'] ?? 'no-credentials'}`));
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    try {
      const plainPort = (plain.address() as AddressInfo).port;
      // As Squid runs by default; the names are the proxy's to resolve.
      const routes = new Map([
        ['wallet.example.test:80', `127.0.0.1:${plainPort}`],
        ['localhost:443', `127.0.0.1:${target.port}`],
      ]);
      proxy = await startConnectProxy({ credentials: { username: 'egress', password: 'p@ss' }, connectPorts: [443], resolve: (to) => routes.get(to) });
      const outbound = createOutbound({ ca, proxy: { httpsProxy: proxy.url, httpProxy: proxy.url } });
      for (let i = 0; i < 2; i++) {
        const answer = await outbound.request({ url: 'http://wallet.example.test/credits?x=1', body: '{}', timeoutMs: 2000, maxBodyBytes: 256 });
        // The proxy takes its credentials off before it forwards.
        expect({ status: answer.status, body: answer.body.toString() }).toEqual({ status: 200, body: 'plain POST /credits?x=1 wallet.example.test no-credentials' });
      }
      expect((await outbound.request({ url: 'https://localhost/a', timeoutMs: 2000, maxBodyBytes: 64 })).body.toString()).toBe('ok');
      expect(proxy.connections.map(({ method, target, requestLine }) => ({ method, target, requestLine }))).toEqual([
        { method: 'FORWARD', target: 'wallet.example.test:80', requestLine: 'POST http://wallet.example.test/credits?x=1' },
        { method: 'FORWARD', target: 'wallet.example.test:80', requestLine: 'POST http://wallet.example.test/credits?x=1' },
        { method: 'CONNECT', target: 'localhost:443', requestLine: undefined },
      ]);
      expect(proxy.refused).toEqual([]);
      await outbound.close();

      // Without the credentials the proxy answers the forwarded request 407: a proxy failure.
      const anonymous = createOutbound({ proxy: { httpProxy: proxy.url.replace('egress:p%40ss@', '') } });
      const refused = await anonymous.request({ url: 'http://wallet.example.test/credits', timeoutMs: 2000, maxBodyBytes: 64 }).catch((error) => error);
      expect(refused).toBeInstanceOf(OutboundError);
      expect(refused).toMatchObject({ failure: 'proxy', message: expect.stringMatching(/407/) });
      expect(proxy.refused).toEqual(['wallet.example.test:80']);
      await anonymous.close();
    } finally {
      await new Promise<void>((resolve) => plain.close(() => resolve()));
    }
  });

  it('fails as a proxy failure when the proxy refuses', async () => {
    proxy = await startConnectProxy({ credentials: { username: 'egress', password: 'right' } });
    const outbound = createOutbound({ ca, proxy: { httpsProxy: proxy.url.replace('right', 'wrong') } });
    const failure = await outbound.request({ url: `${target.origin}/`, timeoutMs: 2000, maxBodyBytes: 64 }).catch((error) => error);
    expect(failure).toBeInstanceOf(OutboundError);
    expect(failure.failure).toBe('proxy');
    expect(proxy.refused).toEqual([`127.0.0.1:${target.port}`]);
    await outbound.close();
  });

  it('carries HTTP/2 through a CONNECT tunnel (connectTls)', async () => {
    proxy = await startConnectProxy();
    const tls = testTls();
    const h2 = http2.createSecureServer({ key: tls.key, cert: tls.cert }, (_req, res) => res.end('h2 ok'));
    await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
    const { port } = h2.address() as AddressInfo;
    const session = http2.connect(`https://localhost:${port}`, {
      createConnection: () => connectTls({ host: '127.0.0.1', port, servername: 'localhost', ca: tls.ca, ALPNProtocols: ['h2'] }, new URL(proxy.url)),
    });
    const text = await new Promise<string>((resolve, reject) => {
      const stream = session.request({ ':path': '/' });
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => (body += chunk));
      stream.on('end', () => resolve(body));
      stream.on('error', reject);
      stream.end();
    });
    expect(text).toBe('h2 ok');
    expect(proxy.targets()).toEqual([`127.0.0.1:${port}`]);
    session.destroy();
    await new Promise<void>((resolve) => h2.close(() => resolve()));
  });

  it('fails the tunnelled TLS connection when the proxy refuses the CONNECT', async () => {
    proxy = await startConnectProxy({ refuse: () => true });
    const socket = connectTls({ host: '127.0.0.1', port: target.port, servername: 'localhost', ca }, new URL(proxy.url));
    const error = await new Promise<Error>((resolve) => socket.on('error', resolve));
    expect(error.message).toMatch(/answered 403 to CONNECT/);
  });
});
