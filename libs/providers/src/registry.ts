import type { ProviderName } from '@operator/contract';
import { sendError, type Notification, type PushProvider, type SendResult, type SendTarget } from './types';

export interface ProviderRegistry {
  /** The client for a brand: its own credentials, else the default ones. One client per credential, reused. */
  providerFor(brandId: string): PushProvider;
  close(): Promise<void>;
}

export interface RegistryOptions<C> {
  name: ProviderName;
  defaultCredential?: C;
  brandCredentials: Map<string, C>;
  create(credential: C, label: string): PushProvider;
  /** Used when no credential at all is configured (development). */
  sandbox?: PushProvider;
  /** PUSH_RETRY_AFTER_MAX_MS: a credential's pause lasts this long at most, whatever its Retry-After. */
  retryAfterMaxMs: number;
}

/**
 * How long a credential pauses when the provider said it was over its quota but not for how long.
 * Short on purpose: too short costs one round of refused sends, too long delays every delivery of
 * the brand on no evidence.
 */
export const DEFAULT_CREDENTIAL_PAUSE_MS = 1000;

/** Answers every send with an auth error: a brand with no credentials must not be sent with another's. */
function unconfigured(name: ProviderName, brandId: string): PushProvider {
  return {
    name,
    async send(_notification: Notification, targets: SendTarget[]) {
      return targets.map(() => ({ ok: false as const, error: sendError('auth', `no ${name} credentials for brand ${brandId}`) }));
    },
    async close() {},
  };
}

/**
 * The client of one credential, paused while that credential is over its quota. A result whose
 * error has scope `credential` (FCM's project quota, APNs' TooManyProviderTokenUpdates) says every
 * send with the credential would be refused alike: until its Retry-After (capped at `maxMs`) has
 * passed, each send answers every target at once with that error and the time left, without calling
 * the provider. Only this client waits: other credentials, and so other brands, go on.
 */
export function pausedOverQuota(client: PushProvider, maxMs: number, now: () => number = Date.now): PushProvider {
  let resumeAt = 0;
  let cause = '';
  const pauseFor = (results: SendResult[]) => {
    for (const result of results) {
      if (result.ok || result.error.scope !== 'credential') continue;
      const until = now() + Math.min(result.error.retryAfterMs ?? DEFAULT_CREDENTIAL_PAUSE_MS, maxMs);
      if (until > resumeAt) {
        resumeAt = until;
        cause = result.error.message;
      }
    }
  };
  return {
    name: client.name,
    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      const left = resumeAt - now();
      if (left > 0) {
        const message = `${client.name} credential paused over its quota: ${cause}`;
        return targets.map(() => ({ ok: false as const, error: sendError('rate-limited', message, left, 'credential') }));
      }
      const results = await client.send(notification, targets);
      pauseFor(results);
      return results;
    },
    close: () => client.close(),
  };
}

export function createProviderRegistry<C>(options: RegistryOptions<C>): ProviderRegistry {
  const clients = new Map<string, PushProvider>();
  const clientFor = (key: string, make: () => PushProvider) => {
    let client = clients.get(key);
    if (!client) {
      client = make();
      clients.set(key, client);
    }
    return client;
  };
  return {
    providerFor(brandId) {
      const own = options.brandCredentials.get(brandId);
      if (own) return clientFor(`brand:${brandId}`, () => pausedOverQuota(options.create(own, `brand-${brandId}`), options.retryAfterMaxMs));
      if (options.defaultCredential) return clientFor('default', () => pausedOverQuota(options.create(options.defaultCredential!, 'default'), options.retryAfterMaxMs));
      if (options.sandbox) return options.sandbox;
      return clientFor(`none:${brandId}`, () => unconfigured(options.name, brandId));
    },
    async close() {
      await Promise.all([...clients.values(), ...(options.sandbox ? [options.sandbox] : [])].map((client) => client.close()));
      clients.clear();
    },
  };
}
