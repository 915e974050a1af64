import ipaddr from 'ipaddr.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { UnavailableOrThrottled } from '@operator/contract';

/** Past it the address that failed longest ago is forgotten, so memory stays bounded. */
export const MAX_TRACKED_KEYS = 20_000;

export interface FailureLimits {
  /** 0: never throttled. */
  limit: number;
  windowMs: number;
  maxKeys?: number;
}

interface Entry {
  failures: number;
  since: number;
  lockedUntil: number;
}

/**
 * Failed authentications per client address, in memory. Successes neither count nor reset, so a
 * working credential never buys more guesses at another.
 */
export class FailureLimiter {
  private readonly entries = new Map<string, Entry>();
  private readonly maxKeys: number;

  constructor(
    private readonly limits: FailureLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.maxKeys = limits.maxKeys ?? MAX_TRACKED_KEYS;
  }

  lockedFor(key: string): number {
    return Math.max(0, (this.entries.get(key)?.lockedUntil ?? 0) - this.now());
  }

  /** Answers whether this failure is the one that throttles `key`. */
  fail(key: string): boolean {
    if (this.limits.limit === 0) return false;
    const now = this.now();
    const seen = this.entries.get(key);
    let throttledNow = false;
    if (seen && seen.lockedUntil > now) {
      seen.lockedUntil = now + this.limits.windowMs;
    } else {
      const entry = seen && now - seen.since < this.limits.windowMs ? seen : { failures: 0, since: now, lockedUntil: 0 };
      entry.failures++;
      if (entry.failures >= this.limits.limit) {
        entry.lockedUntil = now + this.limits.windowMs;
        throttledNow = true;
      }
      this.entries.set(key, entry);
    }
    // Kept in the order of their last failure, so the first is the one to forget.
    const entry = this.entries.get(key)!;
    this.entries.delete(key);
    this.entries.set(key, entry);
    if (this.entries.size > this.maxKeys) this.entries.delete(this.entries.keys().next().value!);
    return throttledNow;
  }

  get size(): number {
    return this.entries.size;
  }
}

/** The client's address as counted: an IPv6 client by its /64, the network one subscriber gets. */
export function addressKey(ip: string): string {
  if (!ipaddr.isValid(ip)) return `address ${ip}`;
  const address = ipaddr.process(ip);
  if (address.kind() === 'ipv4') return `address ${address.toString()}`;
  const network = (address as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `address ${network.join(':')}::/64`;
}

export function inRanges(ranges: string[]): (ip: string) => boolean {
  const parsed = ranges.map((entry) => {
    if (entry.includes('/')) return ipaddr.parseCIDR(entry);
    const address = ipaddr.parse(entry);
    return [address, address.kind() === 'ipv4' ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number];
  });
  return (ip) => {
    if (!parsed.length || !ipaddr.isValid(ip)) return false;
    const address = ipaddr.process(ip);
    return parsed.some((range) => {
      const [network] = range;
      const candidate = network.kind() === address.kind() ? address : address.kind() === 'ipv4' ? (address as ipaddr.IPv4).toIPv4MappedAddress() : undefined;
      return candidate !== undefined && candidate.match(range as [typeof candidate, number]);
    });
  };
}

const throttledText = (seconds: number) => `too many failed authentications from this address; retry in ${seconds} s`;

/**
 * Counts every 401 against the client's address, never a user name a stranger could lock. Past the
 * limit wrong credentials get 503 and right ones are still served, so a shared address costs nothing.
 */
export function throttleAuthFailures(app: FastifyInstance, limits: FailureLimits, exemptRanges: string[] = []) {
  // Every route that answers 401 may answer 503 for this too; the OpenAPI document says so.
  app.addHook('onRoute', (route) => {
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (response?.[401]) route.schema = { ...route.schema, response: { ...response, 503: UnavailableOrThrottled } };
  });
  if (limits.limit === 0) return;

  const limiter = new FailureLimiter(limits);
  const exempt = inRanges(exemptRanges);

  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode !== 401 || exempt(request.ip)) return payload;
    const key = addressKey(request.ip);
    const throttled = limiter.lockedFor(key) > 0;
    if (limiter.fail(key)) request.log.warn({ key }, 'too many failed authentications: wrong credentials from this address are answered 503 for AUTH_FAILURE_WINDOW');
    if (!throttled) return payload;
    const seconds = Math.ceil(limiter.lockedFor(key) / 1000);
    reply.code(503).header('retry-after', String(seconds)).removeHeader('www-authenticate');
    reply.header('content-type', 'application/json; charset=utf-8');
    // Past serialization, so written whole here, in the one error shape.
    return JSON.stringify({ error: throttledText(seconds), code: 503 });
  });
}
