import net from 'node:net';
import { freePort, freePorts } from './ports';

/** Candidates in this order, then the system's. */
const handing = (candidates: number[]) => () => Promise.resolve(candidates.length ? candidates.shift()! : freePort());

describe('freePorts', () => {
  it('skips a port handed out twice, and one that is another port plus the offset', async () => {
    const [a, b] = await freePorts(2, 0);
    expect(await freePorts(3, 0, handing([a, a, b, a]))).toEqual([a, b, expect.any(Number)]);
    const ports = await freePorts(2, 0, handing([a, a]));
    expect(ports[0]).toBe(a);
    expect(ports[1]).not.toBe(a);
  });

  it('skips a port whose port plus the offset is taken, or past 65535', async () => {
    const held = net.createServer();
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    const heldPort = (held.address() as net.AddressInfo).port;
    try {
      const [free] = await freePorts(1, 7);
      // heldPort - 7 has its port + 7 taken by the server; 65530 + 7 is no port.
      const ports = await freePorts(1, 7, handing([heldPort - 7, 65530, free]));
      expect(ports).toEqual([free]);
    } finally {
      await new Promise<void>((resolve) => held.close(() => resolve()));
    }
  });
});
