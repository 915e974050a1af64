import type { Readable } from 'node:stream';
import type net from 'node:net';

// What the fake provider servers share: reading a request's body, waiting, and listening on a
// port of loopback the system picks.

/** A request's whole body, as UTF-8 text. */
export function readBody(req: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Listens on 127.0.0.1, on a port the system picks; answers the port (rejects if it cannot listen). */
export async function listenLocally(server: net.Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as net.AddressInfo).port;
}
