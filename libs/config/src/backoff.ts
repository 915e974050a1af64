/**
 * The retry delay every retrying part uses (send jobs, webhooks, credits): exponential,
 * base * 2^(attempt - 1), capped at `maxMs`, jittered over the upper half so retries spread out,
 * and never shorter than `atLeastMs` (a Retry-After the other side asked for).
 */
export function backoffMs(attempt: number, baseMs: number, maxMs = Number.POSITIVE_INFINITY, atLeastMs = 0): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.max(Math.round(ceiling / 2 + Math.random() * (ceiling / 2)), atLeastMs);
}
