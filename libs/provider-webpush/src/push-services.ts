// What one provider client (one VAPID credential) remembers of the push services it sends to: which
// origins asked to be left alone, until when, and which subscriptions refused our authorization
// since their origin last took a message. One refusal is about its subscription; several distinct
// ones in a short time, with no success, mean the origin refuses our credentials.

/** Distinct subscriptions of one origin whose refusals mean the origin refuses our credentials. */
export const CREDENTIALS_REFUSED_AFTER = 3;
/** Refusals older than this are forgotten. */
export const CREDENTIALS_REFUSED_WINDOW_MS = 10 * 60_000;

export interface OriginPause {
  /** Milliseconds until the origin is tried again. */
  remainingMs: number;
  /** What the origin answered when it asked for the pause (`HTTP 503`). */
  reason: string;
}

export class PushServiceMemory {
  private readonly pauses = new Map<string, { until: number; reason: string }>();
  /** Per origin: the subscriptions that refused us, by endpoint, with when; oldest first. */
  private readonly refusals = new Map<string, Map<string, number>>();

  /** The pause `origin` is under at `now`, or null. */
  paused(origin: string, now: number): OriginPause | null {
    const pause = this.pauses.get(origin);
    if (!pause) return null;
    if (pause.until <= now) {
      this.pauses.delete(origin);
      return null;
    }
    return { remainingMs: pause.until - now, reason: pause.reason };
  }

  /** Sends to `origin` are answered without a connection for `ms` from `now` (a later, longer pause wins). */
  pause(origin: string, ms: number, reason: string, now: number): void {
    for (const [key, pause] of this.pauses) if (pause.until <= now) this.pauses.delete(key);
    if (ms <= 0) return;
    const until = now + ms;
    const current = this.pauses.get(origin);
    if (!current || current.until < until) this.pauses.set(origin, { until, reason });
  }

  /** Records a refusal by the subscription at `endpoint`; answers how many distinct ones of its origin refused within the window (capped at CREDENTIALS_REFUSED_AFTER). */
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
