// What one VAPID credential's client remembers of the push services: origins that asked to be left
// alone, and subscriptions that refused us since their origin last took a message. Several distinct
// refusals in a short time, with no success, mean the origin refuses our credentials.

export const CREDENTIALS_REFUSED_AFTER = 3;
export const CREDENTIALS_REFUSED_WINDOW_MS = 10 * 60_000;

export interface OriginPause {
  remainingMs: number;
  /** What the origin answered (`HTTP 503`). */
  reason: string;
}

export class PushServiceMemory {
  private readonly pauses = new Map<string, { until: number; reason: string }>();
  /** Per origin: when each endpoint refused us, oldest first. */
  private readonly refusals = new Map<string, Map<string, number>>();

  paused(origin: string, now: number): OriginPause | null {
    const pause = this.pauses.get(origin);
    if (!pause) return null;
    if (pause.until <= now) {
      this.pauses.delete(origin);
      return null;
    }
    return { remainingMs: pause.until - now, reason: pause.reason };
  }

  /** A later, longer pause wins. */
  pause(origin: string, ms: number, reason: string, now: number): void {
    for (const [key, pause] of this.pauses) if (pause.until <= now) this.pauses.delete(key);
    if (ms <= 0) return;
    const until = now + ms;
    const current = this.pauses.get(origin);
    if (!current || current.until < until) this.pauses.set(origin, { until, reason });
  }

  /** How many distinct subscriptions of the origin refused within the window, capped at CREDENTIALS_REFUSED_AFTER. */
  refused(origin: string, endpoint: string, now: number): number {
    const since = now - CREDENTIALS_REFUSED_WINDOW_MS;
    for (const [key, endpoints] of this.refusals) {
      for (const [seen, at] of endpoints) {
        if (at > since) break;
        endpoints.delete(seen);
      }
      if (!endpoints.size) this.refusals.delete(key);
    }
    let endpoints = this.refusals.get(origin);
    if (!endpoints) this.refusals.set(origin, (endpoints = new Map()));
    endpoints.delete(endpoint);
    endpoints.set(endpoint, now);
    if (endpoints.size > CREDENTIALS_REFUSED_AFTER) endpoints.delete(endpoints.keys().next().value!);
    return endpoints.size;
  }

  /** The origin took a message: the refusals so far were about their subscriptions. */
  succeeded(origin: string): void {
    this.refusals.delete(origin);
  }
}
