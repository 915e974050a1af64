import pLimit from 'p-limit';
import type { ComplianceEndpoint, ComplianceSettings, LogSink, RedisConnection } from '@operator/config';
import { createOutbound, OutboundError, type Outbound, type ProxySettings } from '@operator/egress';
import { subscribe, type Subscription } from '@operator/queue';
import { COMPLIANCE_CHANNEL, playerKey, type ComplianceGate, type Player, type Verdict } from './gate';

export type { ComplianceSettings };

export interface ComplianceGateDeps {
  /** Where COMPLIANCE_CHANNEL is heard; without it, only forget() drops answers. */
  redis?: RedisConnection;
  /** The worker's HTTPS_PROXY, HTTP_PROXY, NO_PROXY. */
  egress?: ProxySettings;
  /** The outbound client to use instead of one of the gate's own (closed by its owner). */
  outbound?: Outbound;
  log?: LogSink;
  now?: () => number;
}

export interface ComplianceGateHandle extends ComplianceGate {
  /** Settles once COMPLIANCE_CHANNEL is subscribed (at once without `redis`); rejects if it cannot be. */
  readonly ready: Promise<void>;
  /** Players whose answers are held now, expired ones not swept yet included. */
  cachedPlayers(): number;
}

/** An answer's size beyond any player's list of blocks or consents. */
const MAX_BODY_BYTES = 256 * 1024;

interface Cached {
  verdict: Verdict;
  expiresAt: number;
}

interface Lookup {
  promise: Promise<Verdict>;
  /** Set by forget() (or a resubscription): its answer is not cached. */
  stale: boolean;
}

/** A brand's endpoint answered, or gave no usable answer (the error names what failed, never a secret). */
type Records = { ok: true; items: Record<string, unknown>[] } | { ok: false; error: string };

function authorization(endpoint: ComplianceEndpoint): Record<string, string> {
  const credential = endpoint.credential;
  if (!credential) return {};
  if (credential.kind === 'api-key') return { [credential.header]: credential.key };
  return { authorization: `Basic ${Buffer.from(`${credential.username}:${credential.password}`).toString('base64')}` };
}

/** The verdict of a player's blocks and consents, by the rules of docs/operating.md. */
export function verdictOf(blocks: Record<string, unknown>[], consents: Record<string, unknown>[] | undefined, settings: Pick<ComplianceSettings, 'blockTypes' | 'consentDefault'>): Verdict | undefined {
  // Only an explicit `active: false` lifts a block: a record that does not say is taken as in force.
  const active = blocks.filter((block) => block.active !== false).map((block) => String(block.type ?? '').toLowerCase());
  if (active.includes('excluded')) return { kind: 'suppressed', reason: 'excluded' };
  if (active.some((type) => settings.blockTypes.includes(type))) return { kind: 'suppressed', reason: 'blocked' };
  if (!consents) return undefined;
  const push = consents.filter((consent) => String(consent.type ?? '').toLowerCase() === 'pushnotification');
  if (push.length === 0) return settings.consentDefault === 'opted-in' ? { kind: 'allowed' } : { kind: 'suppressed', reason: 'no-consent' };
  return push.every((consent) => consent.opted_in === true) ? { kind: 'allowed' } : { kind: 'suppressed', reason: 'no-consent' };
}

/**
 * The gate over the operator's GET /userblocks/{user_id} and /userconsents/{user_id}: answers cached
 * per player for the TTL, one lookup per player at a time shared by concurrent checks, at most
 * `concurrency` players looked up at once, and players announced on COMPLIANCE_CHANNEL forgotten.
 */
export function createComplianceGate(settings: ComplianceSettings, deps: ComplianceGateDeps = {}): ComplianceGateHandle {
  const now = deps.now ?? Date.now;
  const outbound = deps.outbound ?? createOutbound({ proxy: deps.egress });
  // userId -> brandId -> entry: forget() names user ids, whatever their brand.
  const cache = new Map<string, Map<string, Cached>>();
  const inFlight = new Map<string, Map<string, Lookup>>();
  let closed = false;
  let sweptAt = now();

  // At most `concurrency` players looked up at once.
  const slot = pLimit(settings.concurrency);

  function endpointOf(brandId: string): ComplianceEndpoint | undefined {
    return settings.brands.get(brandId) ?? settings.default;
  }

  async function records(endpoint: ComplianceEndpoint, kind: 'userblocks' | 'userconsents', userId: string): Promise<Records> {
    const field = kind === 'userblocks' ? 'blocks' : 'consents';
    try {
      const answer = await outbound.request({
        url: `${endpoint.url}/${kind}/${encodeURIComponent(userId)}`,
        method: 'GET',
        headers: { accept: 'application/json', ...authorization(endpoint) },
        timeoutMs: settings.timeoutMs,
        maxBodyBytes: MAX_BODY_BYTES,
      });
      // An unknown player: the operator has no records of them.
      if (answer.status === 404) return { ok: true, items: [] };
      if (answer.status < 200 || answer.status > 299) return { ok: false, error: `${kind}: status ${answer.status}` };
      if (answer.truncated) return { ok: false, error: `${kind}: answer larger than ${MAX_BODY_BYTES} bytes` };
      let body: unknown;
      try {
        body = JSON.parse(answer.body.toString('utf8'));
      } catch {
        return { ok: false, error: `${kind}: answer is not JSON` };
      }
      const items = (body as Record<string, unknown> | null)?.[field];
      if (!Array.isArray(items) || !items.every((item) => item !== null && typeof item === 'object')) {
        return { ok: false, error: `${kind}: answer has no list of ${field}` };
      }
      return { ok: true, items: items as Record<string, unknown>[] };
    } catch (error) {
      const reason = error instanceof OutboundError ? error.failure : 'network';
      return { ok: false, error: `${kind}: ${reason}` };
    }
  }

  async function lookUp(player: Player): Promise<Verdict> {
    const endpoint = endpointOf(player.brandId);
    // A brand the gate has no endpoint for is not gated.
    if (!endpoint) return { kind: 'allowed' };
    return slot(async () => {
      const [blocks, consents] = await Promise.all([records(endpoint, 'userblocks', player.userId), records(endpoint, 'userconsents', player.userId)]);
      if (!blocks.ok) return { kind: 'unverified', error: blocks.error };
      const verdict = verdictOf(blocks.items, consents.ok ? consents.items : undefined, settings);
      return verdict ?? { kind: 'unverified', error: consents.ok ? 'no verdict' : consents.error };
    });
  }

  function cached(player: Player): Verdict | undefined {
    const entry = cache.get(player.userId)?.get(player.brandId);
    if (!entry) return undefined;
    if (entry.expiresAt > now()) return entry.verdict;
    cache.get(player.userId)!.delete(player.brandId);
    if (cache.get(player.userId)!.size === 0) cache.delete(player.userId);
    return undefined;
  }

  /**
   * Drops every expired answer, at most once a TTL: a campaign's players are rarely asked about
   * again, so waiting for their next check would keep each one for ever.
   */
  function sweep(): void {
    const at = now();
    if (at - sweptAt < settings.cacheTtlMs) return;
    sweptAt = at;
    for (const [userId, ofUser] of cache) {
      for (const [brandId, entry] of ofUser) if (entry.expiresAt <= at) ofUser.delete(brandId);
      if (ofUser.size === 0) cache.delete(userId);
    }
  }

  function verdictFor(player: Player): Verdict | Promise<Verdict> {
    const hit = cached(player);
    if (hit) return hit;
    const ongoing = inFlight.get(player.userId)?.get(player.brandId);
    if (ongoing) return ongoing.promise;
    const lookup: Lookup = { stale: false, promise: undefined as never };
    lookup.promise = lookUp(player).then((verdict) => {
      const ofUser = inFlight.get(player.userId);
      if (ofUser?.get(player.brandId) === lookup) {
        ofUser.delete(player.brandId);
        if (ofUser.size === 0) inFlight.delete(player.userId);
      }
      // A forget() during the fetch means the answer may predate the change it announced.
      if (verdict.kind !== 'unverified' && !lookup.stale && settings.cacheTtlMs > 0 && !closed) {
        sweep();
        let ofUserCache = cache.get(player.userId);
        if (!ofUserCache) cache.set(player.userId, (ofUserCache = new Map()));
        ofUserCache.set(player.brandId, { verdict, expiresAt: now() + settings.cacheTtlMs });
      }
      return verdict;
    });
    let ofUser = inFlight.get(player.userId);
    if (!ofUser) inFlight.set(player.userId, (ofUser = new Map()));
    ofUser.set(player.brandId, lookup);
    return lookup.promise;
  }

  function forget(userIds: readonly string[]): void {
    for (const userId of userIds) {
      cache.delete(userId);
      const ongoing = inFlight.get(userId);
      if (!ongoing) continue;
      for (const lookup of ongoing.values()) lookup.stale = true;
      inFlight.delete(userId);
    }
  }

  /** After a (re)subscription: any message may have been missed while away. */
  function forgetAll(): void {
    cache.clear();
    for (const ongoing of inFlight.values()) for (const lookup of ongoing.values()) lookup.stale = true;
    inFlight.clear();
  }

  function heard(message: string): void {
    let userIds: unknown;
    try {
      userIds = JSON.parse(message);
    } catch {
      userIds = undefined;
    }
    if (!Array.isArray(userIds) || !userIds.every((id) => typeof id === 'string')) {
      deps.log?.warn({ channel: COMPLIANCE_CHANNEL }, 'a compliance announcement is not a JSON array of user ids; every cached answer is dropped');
      forgetAll();
      return;
    }
    forget(userIds);
  }

  const subscription: Subscription | undefined = deps.redis
    ? subscribe(deps.redis, COMPLIANCE_CHANNEL, heard, { onSubscribed: forgetAll, connectionName: `operator-compliance-${process.pid}`, log: deps.log })
    : undefined;
  const ready = subscription?.ready ?? Promise.resolve();
  ready.catch((error: Error) => deps.log?.error({ err: error.message, channel: COMPLIANCE_CHANNEL }, 'cannot subscribe to compliance announcements'));

  return {
    ready,
    cachedPlayers: () => cache.size,
    async check(players) {
      const distinct = new Map<string, Player>();
      for (const player of players) distinct.set(playerKey(player), player);
      const verdicts = new Map<string, Verdict>();
      await Promise.all(
        [...distinct].map(async ([key, player]) => {
          verdicts.set(key, await verdictFor(player));
        }),
      );
      return verdicts;
    },
    forget,
    async close() {
      closed = true;
      await subscription?.close();
      if (!deps.outbound) await outbound.close();
      cache.clear();
    },
  };
}
