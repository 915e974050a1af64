import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

// A forward proxy as an operator's egress runs one: CONNECT tunnels and absolute-form http. It
// counts what passes, so a test can show every outbound connection went this way, and can require
// credentials, refuse targets, or allow CONNECT to some ports only (Squid's default: 443).

export interface ProxiedConnection {
  /** `host:port` asked for. */
  target: string;
  /** A CONNECT tunnel, or a request in absolute form (`GET http://host/path`) forwarded. */
  method: 'CONNECT' | 'FORWARD';
  /** For a forwarded request: its method and absolute-form target, as the request line had them. */
  requestLine?: string;
  at: number;
}

export interface ConnectProxy {
  /** `http://127.0.0.1:PORT` (with user info when credentials are required). */
  url: string;
  port: number;
  /** Every tunnel and forwarded request, in order. */
  connections: ProxiedConnection[];
  /** Targets (`host:port`) connections were made to, each once. */
  targets(): string[];
  /** Requests refused (bad credentials, a refused target), by target. */
  refused: string[];
  /** CONNECTs left unanswered (`hold`), by target. */
  held: string[];
  close(): Promise<void>;
}

export interface ConnectProxyOptions {
  /** Targets whose CONNECT is never answered (a proxy that hangs); listed in `held`. */
  hold?: (target: string) => boolean;
  /** Require `Proxy-Authorization: Basic` with these credentials (407 otherwise). */
  credentials?: { username: string; password: string };
  /** Targets (`host:port`) answered 403. */
  refuse?: (target: string) => boolean;
  /** The only ports a CONNECT may ask for (Squid's default: [443]); any other is answered 403. Default: all. */
  connectPorts?: number[];
  /** Where the proxy connects for a target (`host:port` → `host:port`), like its network's DNS: names the apps cannot resolve reach local fakes through it. */
  resolve?: (target: string) => string | undefined;
}

export async function startConnectProxy(options: ConnectProxyOptions = {}): Promise<ConnectProxy> {
  const connections: ProxiedConnection[] = [];
  const refused: string[] = [];
  const held: string[] = [];
  const sockets = new Set<net.Socket>();
  const expected = options.credentials ? `Basic ${Buffer.from(`${options.credentials.username}:${options.credentials.password}`).toString('base64')}` : null;

  const allowed = (target: string, authorization: string | undefined): number => {
    if (expected && authorization !== expected) return 407;
    if (options.refuse?.(target)) return 403;
    return 0;
  };

  const server = http.createServer((req, res) => {
    // Absolute-form: GET http://host:port/path HTTP/1.1
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end();
      return;
    }
    const target = `${url.hostname}:${url.port || 80}`;
    const [host, port] = (options.resolve?.(target) ?? target).split(/:(?=\d+$)/);
    const status = allowed(target, req.headers['proxy-authorization']);
    if (status) {
      refused.push(target);
      res.writeHead(status).end();
      return;
    }
    connections.push({ target, method: 'FORWARD', requestLine: `${req.method} ${req.url}`, at: Date.now() });
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const upstream = http.request({ host, port: Number(port), path: `${url.pathname}${url.search}`, method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });

  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const target = req.url ?? '';
    if (options.hold?.(target)) {
      held.push(target);
      return;
    }
    const port = Number(/:(\d+)$/.exec(target)?.[1]);
    const status = options.connectPorts && !options.connectPorts.includes(port) ? 403 : allowed(target, req.headers['proxy-authorization']);
    if (status) {
      refused.push(target);
      client.end(`HTTP/1.1 ${status} ${status === 407 ? 'Proxy Authentication Required' : 'Forbidden'}\r\n\r\n`);
      return;
    }
    const match = (options.resolve?.(target) ?? target).match(/^\[?([^\]]+?)\]?:(\d+)$/);
    if (!match) {
      client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    connections.push({ target, method: 'CONNECT', at: Date.now() });
    const upstream = net.connect(Number(match[2]), match[1], () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const auth = options.credentials ? `${encodeURIComponent(options.credentials.username)}:${encodeURIComponent(options.credentials.password)}@` : '';
  return {
    url: `http://${auth}127.0.0.1:${port}`,
    port,
    connections,
    refused,
    held,
    targets: () => [...new Set(connections.map((connection) => connection.target))],
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
