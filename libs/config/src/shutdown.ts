import closeWithGrace from 'close-with-grace';
import { ConfigError } from './env';
import type { LogSink } from './logger';

export interface ShutdownOptions {
  log: LogSink;
  /** The process has exited by then, whatever `close` and `abandon` do. */
  timeoutMs: number;
  close: () => Promise<void>;
  /** Gives back claimed rows and leases when `close` fails, so another instance takes them over now. */
  abandon?: () => Promise<void>;
}

export interface Shutdown {
  /** Shuts down now, as a signal would. */
  close(): void;
  uninstall(): void;
}

/** The part of the deadline kept for `abandon` once `close` has had its time. */
export function abandonReserveMs(timeoutMs: number): number {
  return Math.min(5000, Math.floor(timeoutMs / 5));
}

/** The one shutdown path of a process: `close`, else `abandon` and exit 1 by `timeoutMs`; a second signal exits at once. */
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

export type PlainErrorClass = abstract new (...args: never[]) => Error;

/** Runs an app's `main`; a ConfigError or one of `plain` is printed as its message alone, without a stack. */
export function runMain(main: () => Promise<unknown>, ...plain: PlainErrorClass[]): void {
  main().catch((error: unknown) => {
    const explained = error instanceof ConfigError || plain.some((type) => error instanceof type);
    console.error(explained ? (error as Error).message : error);
    process.exit(1);
  });
}
