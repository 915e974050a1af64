/** A store (PostgreSQL or Redis) cannot be used right now: the answer is 503 and the CRM retries. */
export class UnavailableError extends Error {
  readonly statusCode = 503;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
