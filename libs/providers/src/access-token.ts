export interface GrantedToken {
  value: string;
  lifetimeMs: number;
}

export interface CachedAccessToken {
  /** The kept token, or a new grant's; every caller waiting meanwhile shares that one grant. */
  get(): Promise<string>;
  /** Forgets `value` (the service refused it) so that the next get() asks again; a newer token is kept. */
  refused(value: string): void;
}

export interface CachedAccessTokenOptions {
  /** Renew this long before the token expires, or halfway through a lifetime shorter than twice this. */
  renewBeforeMs: number;
  /** A test's clock; Date.now by default. */
  now?: () => number;
}

/** A provider's access token, kept and renewed before it expires. A failed grant is not kept: the next get() asks again. */
export function cachedAccessToken(grant: () => Promise<GrantedToken>, options: CachedAccessTokenOptions): CachedAccessToken {
  const now = options.now ?? Date.now;
  let current: { value: string; renewAt: number } | null = null;
  let pending: Promise<string> | null = null;
  return {
    get() {
      if (current && now() < current.renewAt) return Promise.resolve(current.value);
      pending ??= grant()
        .then(({ value, lifetimeMs }) => {
          const early = lifetimeMs > 2 * options.renewBeforeMs ? options.renewBeforeMs : lifetimeMs / 2;
          current = { value, renewAt: now() + lifetimeMs - early };
          return value;
        })
        .finally(() => {
          pending = null;
        });
      return pending;
    },
    refused(value) {
      if (current?.value === value) current = null;
    },
  };
}
