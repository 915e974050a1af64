import closeWithGrace from 'close-with-grace';
import { ConfigError } from './env';
import type { LogSink } from './logger';

export interface ShutdownOptions {
  log: LogSink;
  /** SHUTDOWN_TIMEOUT_MS: the process has exited by then, whatever `close` and `abandon` do. */
  timeoutMs: number;
  /** The graceful close: stop taking work, finish the work in flight, close the clients. */
  close: () => Promise<void>;
  /**
   * Gives back what the process still holds when `close` misses its deadline or fails (claimed
   * rows, leases), so that another instance takes it over now rather than when the lease runs out.
   */
  abandon?: () => Promise<void>;
}

export interface Shutdown {
  /** Shuts down now, as a signal would. */
  close(): void;
  /** Removes the signal and error handlers again. */
  uninstall(): void;
}

/** The part of the deadline kept for `abandon` once `close` has had its time. */
export function abandonReserveMs(timeoutMs: number): number {
  return Math.min(5000, Math.floor(timeoutMs / 5));
}

/**
 * Installs the one shutdown path of a process: SIGTERM or SIGINT runs `close` and exits 0; if it
 * fails or misses the deadline, `abandon` runs and the process exits 1 by `timeoutMs`. A second
 * signal exits at once; an uncaught error is logged and ends the process the same way.
 */
export function onShutdown({ log, timeoutMs, close, abandon }: ShutdownOptions): Shutdown {
  const closeMs = timeoutMs - abandonReserveMs(timeoutMs);
  return closeWithGrace(
    {
      delay: timeoutMs,
      logger: false,
      onTimeout: () => log.error({ timeoutMs }, 'shutdown: deadline passed, exiting'),
      onSecondSignal: (signal) => log.warn({ signal }, 'shutdown: second signal, exiting now'),
      onSecondError: (error) => log.error({ err: error }, 'shutdown: another error while closing, exiting now'),
    },
    async ({ signal, err }) => {
      if (err) log.error({ err }, 'uncaught error: shutting down');
      else log.info({ signal, timeoutMs }, 'shutting down: finishing the work in flight');

      const outcome = await settleWithin(Promise.resolve().then(close), closeMs);
      if (outcome.kind === 'done') {
        log.info({}, 'stopped');
        return; // close-with-grace exits: 0 after a signal, 1 after an error
      }
      if (outcome.kind === 'failed') log.error({ err: outcome.error }, 'shutdown: close failed');
      else log.error({ closeMs }, 'shutdown: the work in flight did not finish in time');
      if (abandon) {
        log.warn({}, 'shutdown: giving back what is still claimed');
        await abandon().catch((error: unknown) => log.error({ err: error }, 'shutdown: giving claims back failed'));
      }
      // Rejecting makes close-with-grace exit 1.
      throw new Error('shutdown did not complete');
    },
  );
}

type Settled = { kind: 'done' } | { kind: 'failed'; error: unknown } | { kind: 'timeout' };

async function settleWithin(work: Promise<void>, ms: number): Promise<Settled> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), ms);
  });
  try {
    return await Promise.race([work.then((): Settled => ({ kind: 'done' }), (error: unknown): Settled => ({ kind: 'failed', error })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** An error class whose message says all an operator needs (a bad setting, a taken port). */
export type PlainErrorClass = abstract new (...args: never[]) => Error;

/**
 * Runs an app's `main`. If it fails, the process exits 1: a ConfigError or an instance of one of
 * `plain` is printed as its message alone, anything else with its stack.
 */
export function runMain(main: () => Promise<unknown>, ...plain: PlainErrorClass[]): void {
  main().catch((error: unknown) => {
    const explained = error instanceof ConfigError || plain.some((type) => error instanceof type);
    console.error(explained ? (error as Error).message : error);
    process.exit(1);
  });
}
