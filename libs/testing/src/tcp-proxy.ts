import net from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL or Redis, so a test can take the store away (every
 * connection cut, new ones refused) and bring it back, without stopping the shared server.
 */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  /** `all`: a partition; `replies`: what the store sends back is held, what it is sent goes through. */
  private held: 'all' | 'replies' | null = null;
  private readonly waiting: (() => void)[] = [];
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  static forUrl(url: string): TcpProxy {
    const { hostname, port, protocol } = new URL(url);
    return new TcpProxy(hostname, Number(port || (protocol.startsWith('redis') ? 6379 : 5432)));
  }

  /** The same URL, through the proxy. */
  urlFor(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  async start(): Promise<this> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      this.relay(client, upstream, false);
      this.relay(upstream, client, true);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
    return this;
  }

  private relay(from: net.Socket, to: net.Socket, reply: boolean) {
    from.on('data', (chunk) => {
      if (this.held === 'all' || (this.held === 'replies' && reply)) this.waiting.push(() => to.write(chunk));
      else to.write(chunk);
    });
  }

  /** The store is gone: open connections are cut and new ones refused. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    this.waiting.length = 0;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /**
   * A network partition: connections stay open but nothing goes through, so requests time out.
   * What was sent meanwhile is delivered when the partition heals, as TCP would.
   */
  partition(): void {
    this.held = 'all';
  }

  /**
   * The store's answers are held while what is sent to it goes through: a command runs but its
   * reply is lost if the connection is cut (stop) before the hold ends.
   */
  holdReplies(): void {
    this.held = 'replies';
  }

  /** The store is back, on the same port. */
  async resume(): Promise<void> {
    this.held = null;
    for (const flush of this.waiting.splice(0)) flush();
    if (!this.server) await this.start();
  }
}
