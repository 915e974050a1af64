import ipaddr from 'ipaddr.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CrmAuthSettings } from '@operator/config';
import { TooManyFailures } from '@operator/contract';
import { authorizationOf, basicCredentials } from './crm-auth';
import { formDecoded, TOKEN_PATH } from './routes/oauth-token';

/** Keys kept at most: past it the one that failed longest ago is forgotten, so memory stays bounded. */
export const MAX_TRACKED_KEYS = 20_000;

export interface FailureLimits {
  /** Failures within `windowMs` that lock a key out for `windowMs`; 0: never. */
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
 * Failed authentications per key (a client's address, a Basic user, an OAuth client), in this
 * process's memory: `limit` failures within a window lock the key out for a window. Successes are
 * not counted and do not reset a count, so one credential that works never buys more guesses at
 * another.
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

  /** Milliseconds until none of `keys` is locked out any more: 0 when none is. */
  lockedFor(keys: Iterable<string>): number {
    const now = this.now();
    let wait = 0;
    for (const key of keys) {
      const lockedUntil = this.entries.get(key)?.lockedUntil ?? 0;
      wait = Math.max(wait, lockedUntil - now);
    }
    return wait;
  }

  /** Counts a failure against each of `keys`; answers those this failure locks out. */
  fail(keys: Iterable<string>): string[] {
    if (this.limits.limit === 0) return [];
    const now = this.now();
    const locked: string[] = [];
    for (const key of keys) {
      const seen = this.entries.get(key);
      if (seen && seen.lockedUntil > now) continue;
      const entry = seen && now - seen.since < this.limits.windowMs ? seen : { failures: 0, since: now, lockedUntil: 0 };
      entry.failures++;
      if (entry.failures >= this.limits.limit) {
        entry.lockedUntil = now + this.limits.windowMs;
        locked.push(key);
      }
      // Kept in the order of their last failure, so the first is the one to forget.
      this.entries.delete(key);
      this.entries.set(key, entry);
      if (this.entries.size > this.maxKeys) this.entries.delete(this.entries.keys().next().value!);
    }
    return locked;
  }

  get size(): number {
    return this.entries.size;
  }
}

/** The client's address as counted: an IPv6 client by its /64, the network one subscriber gets. */
function addressKey(ip: string): string {
  if (!ipaddr.isValid(ip)) return `address ${ip}`;
  const address = ipaddr.process(ip);
  if (address.kind() === 'ipv4') return `address ${address.toString()}`;
  const network = (address as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `address ${network.join(':')}::/64`;
}

/** Addresses remembered per user or client as having authenticated as it. */
const PROVEN_ADDRESSES_PER_NAME = 64;

/**
 * Answers 429 with Retry-After to a request that authenticates (X-Api-Key, Authorization, the
 * token endpoint) while its address, or the Basic user or OAuth client it names, is locked out;
 * the right credentials too. Every 401 the gateway answers counts as a failure of those keys. Only
 * the users and clients of `auth` are counted by name: an unknown name opens nothing to guess at.
 * A name's lockout spares the addresses that have authenticated as it: they are not guessing, and
 * whoever guesses at the CRM's password from elsewhere does not stop the CRM.
 */
export function throttleAuthFailures(app: FastifyInstance, limits: FailureLimits, auth: CrmAuthSettings) {
  // Every route that answers 401 may answer this too; the OpenAPI document says so.
  app.addHook('onRoute', (route) => {
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (response?.[401]) route.schema = { ...route.schema, response: { ...response, 429: TooManyFailures } };
  });
  if (limits.limit === 0) return;

  const limiter = new FailureLimiter(limits);
  const users = new Set(auth.basicUsers.map(({ id }) => id));
  const clients = new Set(auth.oauthClients.map(({ id }) => id));
  const provenAddresses = new Map<string, Set<string>>();
  const onTokenEndpoint = (request: FastifyRequest) => request.routeOptions.url === TOKEN_PATH;

  /** The request's address, and the configured users or clients it names. */
  function keysOf(request: FastifyRequest): { address: string; names: Set<string> } {
    const address = addressKey(request.ip);
    const names = new Set<string>();
    const authorization = authorizationOf(request.headers.authorization);
    const basic = authorization?.scheme === 'basic' ? basicCredentials(authorization.value)?.id : undefined;
    if (!onTokenEndpoint(request)) {
      if (basic !== undefined && users.has(basic)) names.add(`user ${basic}`);
      return { address, names };
    }
    const fields = request.method === 'GET' ? request.query : request.body;
    const named = fields !== null && typeof fields === 'object' ? (fields as { client_id?: unknown }).client_id : undefined;
    for (const id of [basic, basic && formDecoded(basic), named]) {
      if (typeof id === 'string' && clients.has(id)) names.add(`client ${id}`);
    }
    return { address, names };
  }

  const refuseIfLocked = (request: FastifyRequest, reply: FastifyReply) => {
    const { address, names } = keysOf(request);
    const waitMs = limiter.lockedFor([address, ...[...names].filter((name) => !provenAddresses.get(name)?.has(address))]);
    if (waitMs <= 0) return undefined;
    const seconds = Math.ceil(waitMs / 1000);
    return reply.code(429).header('retry-after', String(seconds)).send({ error: `too many failed authentications; retry in ${seconds} s` });
  };

  app.addHook('onRequest', async (request, reply) => {
    const authenticates = request.headers['x-api-key'] !== undefined || request.headers.authorization !== undefined || onTokenEndpoint(request);
    if (authenticates) return refuseIfLocked(request, reply);
  });
  // A token request's client may be in its body, read by now.
  app.addHook('preHandler', async (request, reply) => {
    if (onTokenEndpoint(request)) return refuseIfLocked(request, reply);
  });
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode === 401) {
      const { address, names } = keysOf(request);
      for (const key of limiter.fail([address, ...names])) request.log.warn({ key }, 'too many failed authentications: locked out for AUTH_FAILURE_WINDOW');
    } else if (reply.statusCode < 400 && (request.headers.authorization !== undefined || onTokenEndpoint(request))) {
      const { address, names } = keysOf(request);
      for (const name of names) {
        const proven = provenAddresses.get(name) ?? provenAddresses.set(name, new Set()).get(name)!;
        proven.delete(address);
        proven.add(address);
        if (proven.size > PROVEN_ADDRESSES_PER_NAME) proven.delete(proven.values().next().value!);
      }
    }
    return payload;
  });
}
