import pLimit from 'p-limit';

// The streams an HTTP/2 provider client (FCM, APNs) has on the wire: on each connection as many
// as its server's SETTINGS_MAX_CONCURRENT_STREAMS allows, on at most `maxConnections` connections;
// past that a send waits here for a free stream, before its deadline starts. Until a connection's
// SETTINGS come it is taken to allow STREAMS_BEFORE_SETTINGS, and a send finding it full waits for
// them rather than open another connection the announced limit may not need.

/** Streams assumed until a server's SETTINGS come: HTTP/2's recommended least (RFC 9113 6.5.2), FCM's own. */
export const STREAMS_BEFORE_SETTINGS = 100;
/**
 * Streams used on one connection at most, whatever its server allows: an unannounced limit reads
 * as 2^32 - 1, and the sends a killed worker may repeat are the ones on the wire.
 */
export const MAX_STREAMS_PER_CONNECTION = 1000;

/** The streams a server allows on one connection, from `maxConcurrentStreams` of its SETTINGS (undefined: not come yet). */
export function streamsAllowed(maxConcurrentStreams: number | undefined): number {
  if (maxConcurrentStreams === undefined) return STREAMS_BEFORE_SETTINGS;
  return Math.max(0, Math.min(maxConcurrentStreams, MAX_STREAMS_PER_CONNECTION));
}

export interface StreamPoolOptions<C> {
  /** Connections at once, those still finishing their streams after a GOAWAY included. */
  maxConnections: number;
  /** Opens a connection (it may still be connecting). */
  open(): C;
  /** Streams the connection takes at once now (see streamsAllowed). */
  streams(connection: C): number;
  /**
   * Its server's SETTINGS came. Until they do, a connection takes STREAMS_BEFORE_SETTINGS, and a
   * send finding it full waits for them (call wake()) rather than open another connection that
   * the announced limit may not need. Default: always.
   */
  settled?(connection: C): boolean;
  /** False once it takes no new streams (GOAWAY, failed, closed): it leaves the pool when its last stream is done. */
  takesStreams(connection: C): boolean;
  /** Told when a connection left the pool (no streams left on it, and it takes no more). */
  retired?(connection: C): void;
}

/** One stream's place on a connection; `release()` once the exchange is over (more calls are ignored). */
export interface StreamLease<C> {
  readonly connection: C;
  release(): void;
}

export interface StreamPool<C> {
  /** A stream on the least busy connection with one free, a new connection when all are full, else the first to free up. */
  lease(): Promise<StreamLease<C>>;
  /** Looks at the waiting sends again: call when a connection's limit may have grown (its SETTINGS came) or it stopped taking streams. */
  wake(): void;
  /** Streams leased now. */
  readonly inFlight: number;
  /** Connections in the pool now. */
  readonly connections: number;
  /** Sends waiting for a stream. */
  readonly waiting: number;
  /** Every connection in the pool (to close them). */
  all(): C[];
}

export function createStreamPool<C>(options: StreamPoolOptions<C>): StreamPool<C> {
  const maxConnections = Math.max(1, Math.floor(options.maxConnections));
  /** Streams leased on each connection of the pool. */
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

  /** A connection with a stream free (the least busy), a new one if there is room, else undefined. */
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

/** At most `limit` tasks at once, the others in turn (PUSH_PROVIDER_CONCURRENCY); undefined: no limit of its own. */
export function inFlightLimit(limit: number | undefined): <T>(task: () => Promise<T>) => Promise<T> {
  if (limit === undefined) return (task) => task();
  const limited = pLimit(Math.max(1, Math.floor(limit)));
  return (task) => limited(task);
}
