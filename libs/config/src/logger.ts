import pino, { type Logger } from 'pino';

/** Fields that never reach a log line: API keys, credentials, device tokens. One list for every app. */
export const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  '*.token',
  '*.access_token',
  '*.client_secret',
  '*.password',
  '*.private_key',
  '*.privateKey',
  '*.key',
  '*.auth',
  '*.p256dh',
];

export function createLogger(name: string, level: string): Logger {
  return pino({ name, level, redact: { paths: REDACTED_PATHS, censor: '[Redacted]' } });
}

/**
 * A configured URL as a log line may show it: `protocol//host[:port]` only, since the rest may carry
 * credentials. Null for an empty setting; never the text itself when it is not a URL with a host.
 */
export function urlOrigin(url: string | undefined): string | null {
  if (!url) return null;
  const parsed = URL.canParse(url) ? new URL(url) : undefined;
  // URL's own `origin` is "null" for schemes it does not know (amqp:, redis:, postgresql:).
  return parsed?.host ? `${parsed.protocol}//${parsed.host}` : '(not a URL with a host)';
}

export type { Logger };

/** What the libraries log through; a pino logger is one. */
export interface LogSink {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}
