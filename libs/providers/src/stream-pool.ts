import pLimit from 'p-limit';

// The streams an HTTP/2 provider client (FCM, APNs) has on the wire: as many per connection as its
// server announces, on at most `maxConnections`; past that a send waits here, before its deadline
// starts.

/** Until a server's SETTINGS come: HTTP/2's recommended least (RFC 9113 6.5.2), and FCM's. */
export const STREAMS_BEFORE_SETTINGS = 100;
/** Whatever the server allows: an unannounced limit reads as 2^32 - 1, and a killed worker's sends on the wire may repeat. */
export const MAX_STREAMS_PER_CONNECTION = 1000;

export function streamsAllowed(maxConcurrentStreams: number | undefined): number {
  if (maxConcurrentStreams === undefined) return STREAMS_BEFORE_SETTINGS;
  return Math.max(0, Math.min(maxConcurrentStreams, MAX_STREAMS_PER_CONNECTION));
}

export interface StreamPoolOptions<C> {
  /** Those still finishing their streams after a GOAWAY included. */
  maxConnections: number;
  open(): C;
  streams(connection: C): number;
  /**
   * Its server's SETTINGS came. A send finding an unsettled connection full waits for them (call
   * wake()) rather than open another connection the announced limit may not need.
   */
  settled?(connection: C): boolean;
  /** False once it takes no new streams: it leaves the pool when its last stream is done. */
  takesStreams(connection: C): boolean;
  retired?(connection: C): void;
}

/** `release()` once the exchange is over (more calls are ignored). */
export interface StreamLease<C> {
  readonly connection: C;
  release(): void;
}

export interface StreamPool<C> {
  /** The least busy connection with a stream free, a new one when all are full, else the first to free up. */
  lease(): Promise<StreamLease<C>>;
  /** Call when a connection's limit may have grown or it stopped taking streams. */
  wake(): void;
  readonly inFlight: number;
  readonly connections: number;
  readonly waiting: number;
  all(): C[];
}

export function createStreamPool<C>(options: StreamPoolOptions<C>): StreamPool<C> {
  const maxConnections = Math.max(1, Math.floor(options.maxConnections));
  const leased = new Map<C, number>();
  const waiters: ((lease: StreamLease<C>) => void)[] = [];
  let inFlight = 0;

  function leaseOn(connection: C): StreamLease<C> {
    leased.set(connection, (leased.get(connection) ?? 0) + 1);
    inFlight += 1;
    let released = false;
    return {
      connection,
      release() {
        if (released) return;
        released = true;
        inFlight -= 1;
        leased.set(connection, leased.get(connection)! - 1);
        wake();
      },
    };
  }

  function place(): C | undefined {
    let least: C | undefined;
    let leastCount = Infinity;
    for (const [connection, count] of leased) {
      if (!options.takesStreams(connection) || count >= options.streams(connection)) continue;
      if (count < leastCount) {
        least = connection;
        leastCount = count;
      }
    }
    if (least !== undefined) return least;
    if (leased.size >= maxConnections) return undefined;
    for (const connection of leased.keys()) {
      if (options.takesStreams(connection) && options.settled && !options.settled(connection)) return undefined;
    }
    const connection = options.open();
    leased.set(connection, 0);
    return connection;
  }

  function prune() {
    for (const [connection, count] of leased) {
      if (count === 0 && !options.takesStreams(connection)) {
        leased.delete(connection);
        options.retired?.(connection);
      }
    }
  }

  function wake() {
    prune();
    while (waiters.length > 0) {
      const connection = place();
      if (connection === undefined) return;
      waiters.shift()!(leaseOn(connection));
    }
  }

  return {
    lease() {
      prune();
      const connection = waiters.length === 0 ? place() : undefined;
      if (connection !== undefined) return Promise.resolve(leaseOn(connection));
      return new Promise((resolve) => waiters.push(resolve));
    },
    wake,
    get inFlight() {
      return inFlight;
    },
    get connections() {
      return leased.size;
    },
    get waiting() {
      return waiters.length;
    },
    all: () => [...leased.keys()],
  };
}

/** At most `limit` tasks at once (PUSH_PROVIDER_CONCURRENCY); undefined: no limit of its own. */
export function inFlightLimit(limit: number | undefined): <T>(task: () => Promise<T>) => Promise<T> {
  if (limit === undefined) return (task) => task();
  const limited = pLimit(Math.max(1, Math.floor(limit)));
  return (task) => limited(task);
}
