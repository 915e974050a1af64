import net from 'node:net';

/** A local port nothing listens on right now (the system picked it, then it was let go). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Whether nothing listens on `port` of 127.0.0.1 right now. */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * `count` distinct free ports, each with `port + offset` free too and not among them (a Redis
 * Cluster node also listens on its port + 10,000 for the cluster bus). The system may hand the same
 * port out twice once it is let go, so each is checked against those taken before. `next` is where
 * candidates come from (the system, but for tests).
 */
export async function freePorts(count: number, offset = 0, next: () => Promise<number> = freePort): Promise<number[]> {
  const taken = new Set<number>();
  const ports: number[] = [];
  while (ports.length < count) {
    const port = await next();
    const busy = [port, port + offset].some((p) => taken.has(p)) || port + offset > 65535;
    if (busy || (offset && !(await isFree(port + offset)))) continue;
    taken.add(port).add(port + offset);
    ports.push(port);
  }
  return ports;
}
