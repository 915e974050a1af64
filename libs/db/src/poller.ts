import { backoffMs, type LogSink } from '@operator/config';
import { isDbUnavailable } from './client';

export interface PollerOptions {
  /** For the logs ("dispatch", "bonus"). */
  what: string;
  log: LogSink;
  /** One round; answers true when there is more to do at once (it took a full batch). */
  round(): Promise<boolean>;
  /** Pause after a round that found little to do. */
  idleMs: number;
  maxBackoffMs?: number;
}

export interface Poller {
  start(): void;
  /** Finishes the round in flight, then stops. */
  stop(): Promise<void>;
}

/** Runs rounds until stopped: at once while there is more, after `idleMs` otherwise, backing off in an outage. */
export function createPoller({ what, log, round, idleMs, maxBackoffMs = 5000 }: PollerOptions): Poller {
  let running = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function run() {
    let failures = 0;
    while (running) {
      let more = false;
      try {
        more = await round();
        if (failures) log.info({}, `${what} rounds running again`);
        failures = 0;
      } catch (error) {
        failures += 1;
        if (!isDbUnavailable(error)) log.error({ err: error }, `${what} round failed`);
        else if (failures === 1) log.warn({ err: (error as Error).message }, `${what} rounds wait for PostgreSQL`);
      }
      if (!running) break;
      if (failures) await pause(backoffMs(failures, idleMs, Math.max(idleMs, maxBackoffMs)));
      else if (!more) await pause(idleMs);
    }
  }

  return {
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
}
