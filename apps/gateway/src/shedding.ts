import { monitorEventLoopDelay } from 'node:perf_hooks';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { FastifyInstance } from 'fastify';
import { RETRY_AFTER_SECONDS } from './errors';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** false: the route is answered while the gateway sheds load (liveness: a busy process is alive). */
    shed?: boolean;
  }
}

export interface PressureLimits {
  /** 0: not looked at. */
  maxEventLoopDelayMs: number;
  /** 0: not looked at. */
  maxHeapUsedBytes: number;
  sampleIntervalMs?: number;
}

/** The resolution of the event-loop delay histogram: its samples are late by at least this. */
const RESOLUTION_MS = 10;

/**
 * The heap in use counts garbage until the next full collection, which may be far off while the
 * gateway sheds (it allocates little): without one, shedding would outlast its cause.
 */
function fullCollection(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return exposed;
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  v8.setFlagsFromString('--no-expose-gc');
  return gc;
}

/** 503 with Retry-After while the last sample is over a limit; each sample starts afresh, so shedding ends with the pressure. */
export function shedUnderPressure(app: FastifyInstance, limits: PressureLimits) {
  const { maxEventLoopDelayMs, maxHeapUsedBytes, sampleIntervalMs = 1000 } = limits;
  if (maxEventLoopDelayMs <= 0 && maxHeapUsedBytes <= 0) return;
  const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();
  const collect = maxHeapUsedBytes > 0 ? fullCollection() : undefined;
  let pressure: string | undefined;

  function sample() {
    const lagMs = delay.count === 0 ? 0 : Math.max(0, delay.mean / 1e6 - RESOLUTION_MS);
    delay.reset();
    let heapUsed = maxHeapUsedBytes > 0 ? process.memoryUsage().heapUsed : 0;
    if (maxHeapUsedBytes > 0 && heapUsed > maxHeapUsedBytes) {
      collect!();
      heapUsed = process.memoryUsage().heapUsed;
    }
    const was = pressure;
    pressure =
      maxEventLoopDelayMs > 0 && lagMs > maxEventLoopDelayMs
        ? `event-loop delay ${Math.round(lagMs)} ms`
        : maxHeapUsedBytes > 0 && heapUsed > maxHeapUsedBytes
          ? `heap in use ${heapUsed} bytes`
          : undefined;
    if (pressure !== was) app.log.warn({ pressure: pressure ?? 'none' }, pressure ? 'shedding load' : 'no longer shedding load');
  }
  const timer = setInterval(sample, sampleIntervalMs);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    delay.disable();
  });

  app.addHook('onRequest', async (request, reply) => {
    if (pressure === undefined || request.routeOptions.config.shed === false) return;
    return reply.code(503).header('retry-after', String(RETRY_AFTER_SECONDS)).send({ error: 'server is overloaded, retry later' });
  });
}
