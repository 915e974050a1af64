import type { ProviderName } from '@operator/contract';
import { sendError, type Notification, type PushProvider, type SendTarget } from './types';

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
}

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
      if (own) return clientFor(`brand:${brandId}`, () => options.create(own, `brand-${brandId}`));
      if (options.defaultCredential) return clientFor('default', () => options.create(options.defaultCredential!, 'default'));
      if (options.sandbox) return options.sandbox;
      return clientFor(`none:${brandId}`, () => unconfigured(options.name, brandId));
    },
    async close() {
      await Promise.all([...clients.values(), ...(options.sandbox ? [options.sandbox] : [])].map((client) => client.close()));
      clients.clear();
    },
  };
}
