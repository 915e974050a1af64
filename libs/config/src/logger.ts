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

export type { Logger };

/** What the libraries log through; a pino logger is one. */
export interface LogSink {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}
