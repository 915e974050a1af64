/** Statuses under 500 that ask for another try later rather than refuse: timeout, too early, too many requests. */
export const RETRIED_STATUSES: ReadonlySet<number> = new Set([408, 425, 429]);

/** Whether an HTTP answer with this status is worth another try (any 5xx, or one of RETRIED_STATUSES). */
export function isRetriedStatus(status: number): boolean {
  return status >= 500 || RETRIED_STATUSES.has(status);
}

/** Retry-After as seconds or an HTTP date, in milliseconds from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | number | undefined | null, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text === null || text === '') return undefined;
  const seconds = Number(text);
  if (Number.isFinite(seconds)) return Math.max(0, Math.round(seconds * 1000));
  const date = Date.parse(String(text));
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** What went wrong, in words: an Error's message, anything else as a string. */
export function errorReason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
