/** Exponential, capped, jittered over the upper half so retries spread out; never under `atLeastMs` (a Retry-After). */
export function backoffMs(attempt: number, baseMs: number, maxMs = Number.POSITIVE_INFINITY, atLeastMs = 0): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.max(Math.round(ceiling / 2 + Math.random() * (ceiling / 2)), atLeastMs);
}
