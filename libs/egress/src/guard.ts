import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

// Server-side request forgery is stopped where the socket is opened: a `lookup` of our own resolves
// the name, checks each address and connects to a checked one, so DNS rebinding cannot slip past.

export class AddressRefusedError extends Error {
  readonly code = 'EADDRREFUSED';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly range: string,
  ) {
    super(`${host} resolves to ${address} (${range}), which is not a public address`);
    this.name = 'AddressRefusedError';
  }
}

/** ipaddr.js's range; IPv4-mapped IPv6 as IPv4. */
export function addressRange(address: string): string {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range();
}

/** ipaddr.js's `unicast` range only: link-local (cloud metadata) and the rest are refused. */
export function isPublicAddress(address: string): boolean {
  if (!net.isIP(address)) return false;
  return addressRange(address) === 'unicast';
}

export function checkAddress(host: string, address: string): void {
  if (!isPublicAddress(address)) throw new AddressRefusedError(host, address, net.isIP(address) ? addressRange(address) : 'not an address');
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls.connect and undici that fails with AddressRefusedError if any address the
 * name resolves to is not public. net.connect skips `lookup` for an IP literal: checkAddress() those.
 */
export function publicOnlyLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '');
    const list = addresses as dns.LookupAddress[];
    const refused = list.find((entry) => !isPublicAddress(entry.address));
    if (refused) return callback(new AddressRefusedError(hostname, refused.address, addressRange(refused.address)) as unknown as NodeJS.ErrnoException, '');
    if (options.all) return callback(null, list);
    callback(null, list[0].address, list[0].family);
  });
}

export async function assertPublicHost(host: string): Promise<void> {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (net.isIP(bare)) return checkAddress(bare, bare);
  const addresses = await dns.promises.lookup(bare, { all: true });
  for (const { address } of addresses) checkAddress(bare, address);
}
