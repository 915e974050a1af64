import { Type, type Static } from '@sinclair/typebox';
import { ConfigError, parseEnv, type Env } from './env';
import { DatabaseEnv, databaseProblems, EgressEnv, ReadDatabaseEnv, readDatabaseProblems, readDatabaseUrl, egressSettings, MetricsEnv, outboundUrlProblems, RuntimeEnv, RetentionEnv, type EgressSettings, type NodeEnv } from './base';
import { MIN_SECRET_LENGTH, weakSecretProblems } from './secrets';

export const DEV_TRACKING_SECRET = 'dev-tracking-secret';
export const DEV_WEBHOOK_SECRET = 'dev-webhook-secret';
/** The local RabbitMQ's guest account: refused in production. */
export const DEV_AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';

/** Signs the tracking token each push carries (gateway and workers share it). */
export const TrackingEnv = Type.Object({
  TRACKING_SECRET: Type.String({
    default: DEV_TRACKING_SECRET,
    minLength: 16,
    description: `Key of the HMAC that makes each push’s tracking token (${MIN_SECRET_LENGTH}+ characters in production)`,
  }),
});

export const WebhookAgeEnv = Type.Object({
  WEBHOOK_MAX_AGE: Type.String({ default: '24h', pattern: '^\\d+\\s*[smhd]?$', description: 'How long an event is retried before it goes to the dead letters ("24h", "90m", "3600")' }),
});

export const DispatcherEnv = Type.Object({
  CRM_STATUS_WEBHOOK_URL: Type.String({ default: '', description: 'Where push status events are POSTed; empty: polling only' }),
  CRM_STATUS_WEBHOOK_FORMAT: Type.Union([Type.Literal('event'), Type.Literal('conversion')], {
    default: 'event',
    description: "Body of the status webhook: event (every status, with event_id, push_id, activity, meta) or conversion (the CRM's conversion endpoint: delivered, read, clicked with the meta)",
  }),
  CRM_STATUS_WEBHOOK_BATCH_MAX: Type.Integer({
    default: 1,
    minimum: 1,
    maximum: 1000,
    description: 'Status events per POST, as one JSON array of events (event format only, at most WEBHOOK_BATCH_SIZE); 1: each event alone, as an object',
  }),
  CRM_CONVERSION_DELIVERED_ON: Type.Union([Type.Literal('provider'), Type.Literal('device')], {
    default: 'provider',
    description: 'In the conversion format, when `delivered` is posted: provider (the provider accepted the push) or device (the device reported it)',
  }),
  CRM_EVENTS_BASE_URL: Type.String({ default: '', description: "The CRM's real-time data API; bonus events go to /v1/integration/bonus, balances to /v1/integration/user/balances" }),
  CRM_EVENTS_TRANSPORT: Type.Union([Type.Literal('http'), Type.Literal('rabbitmq')], {
    default: 'http',
    description: 'How bonus and balance events reach the CRM: http (POSTed under CRM_EVENTS_BASE_URL) or rabbitmq (published to CRM_EVENTS_AMQP_URL)',
  }),
  CRM_EVENTS_AMQP_URL: Type.String({ default: DEV_AMQP_URL, description: "The CRM's RabbitMQ (amqp:// or amqps://, with its user and password), for CRM_EVENTS_TRANSPORT=rabbitmq" }),
  CRM_EVENTS_AMQP_EXCHANGE: Type.String({ default: 'crm-events', minLength: 1, description: 'The durable topic exchange bonus and balance events are published on' }),
  CRM_WEBHOOK_SECRET: Type.String({
    default: DEV_WEBHOOK_SECRET,
    minLength: 16,
    description: `Key of the HMAC-SHA256 X-Signature on every request (${MIN_SECRET_LENGTH}+ characters in production)`,
  }),
  CRM_WEBHOOK_USERNAME: Type.String({ default: '', description: 'Basic auth user towards the CRM (with CRM_WEBHOOK_PASSWORD)' }),
  CRM_WEBHOOK_PASSWORD: Type.String({ default: '', description: 'Basic auth password towards the CRM' }),
  CRM_WEBHOOK_API_KEY_HEADER: Type.String({ default: 'X-Api-Key', description: 'Header that carries CRM_WEBHOOK_API_KEY' }),
  CRM_WEBHOOK_API_KEY: Type.String({ default: '', description: 'API key towards the CRM, if it wants one' }),
  WEBHOOK_TIMEOUT_MS: Type.Integer({ default: 10000, minimum: 100, description: 'Time to wait for the CRM to answer one event' }),
  WEBHOOK_CONCURRENCY: Type.Integer({ default: 64, minimum: 1, description: 'Events posted at once, each over its own kept-alive connection' }),
  WEBHOOK_PIPELINING: Type.Integer({
    default: 1,
    minimum: 1,
    maximum: 64,
    description: 'Posts written on one kept-alive connection before its first answer (HTTP/1.1 pipelining, for a receiver that takes it): WEBHOOK_CONCURRENCY posts share WEBHOOK_CONCURRENCY / WEBHOOK_PIPELINING connections; 1: one at a time',
  }),
  WEBHOOK_BATCH_SIZE: Type.Integer({ default: 4000, minimum: 1, maximum: 10000, description: 'Events claimed from the outbox at once; more are claimed when half are posted' }),
  WEBHOOK_BACKOFF_MS: Type.Integer({ default: 1000, minimum: 1, description: 'Base of the exponential backoff between attempts' }),
  WEBHOOK_MAX_BACKOFF_MS: Type.Integer({ default: 600000, minimum: 1, description: 'Longest wait between two attempts' }),
  WEBHOOK_POLL_MS: Type.Integer({ default: 200, minimum: 10, description: 'Pause between looks at the outbox when it is empty' }),
});

const UNIT_MS: Record<string, number> = { '': 1000, s: 1000, m: 60000, h: 3600000, d: 86400000 };

/** "24h", "90m", "30s", "2d" or plain seconds, in milliseconds. */
export function durationMs(text: string): number {
  const match = text.trim().match(/^(\d+)\s*([smhd]?)$/);
  if (!match) throw new ConfigError([`"${text}" is not a duration (like 24h, 90m, 3600)`]);
  return Number(match[1]) * UNIT_MS[match[2]];
}

export const DispatcherConfigSchema = Type.Composite([RuntimeEnv, DatabaseEnv, ReadDatabaseEnv, MetricsEnv, EgressEnv, DispatcherEnv, WebhookAgeEnv, RetentionEnv]);
export type DispatcherConfig = Static<typeof DispatcherConfigSchema> & { maxAgeMs: number; egress: EgressSettings };

/** CRM_EVENTS_AMQP_URL's problems, which never quote it: it holds a password. */
function amqpUrlProblems(nodeEnv: NodeEnv, value: string, problems: string[]) {
  const protocol = URL.canParse(value) ? new URL(value).protocol : undefined;
  if (protocol !== 'amqp:' && protocol !== 'amqps:') problems.push('CRM_EVENTS_AMQP_URL must be an amqp:// or amqps:// URL');
  else if (nodeEnv === 'production' && value === DEV_AMQP_URL) problems.push("CRM_EVENTS_AMQP_URL is the local development broker; set the CRM's RabbitMQ in production");
}

export function loadDispatcherConfig(env: Env = process.env): DispatcherConfig {
  const raw = parseEnv(DispatcherConfigSchema, env);
  const problems: string[] = [...databaseProblems(raw), ...readDatabaseProblems(raw)];
  // Never quoted: a webhook URL may carry credentials.
  problems.push(...outboundUrlProblems('CRM_STATUS_WEBHOOK_URL', raw.CRM_STATUS_WEBHOOK_URL, raw.NODE_ENV));
  if (raw.CRM_EVENTS_TRANSPORT === 'http') problems.push(...outboundUrlProblems('CRM_EVENTS_BASE_URL', raw.CRM_EVENTS_BASE_URL, raw.NODE_ENV));
  const { egress, problems: egressProblems } = egressSettings(raw, env);
  problems.push(...egressProblems);
  if (Boolean(raw.CRM_WEBHOOK_USERNAME) !== Boolean(raw.CRM_WEBHOOK_PASSWORD)) {
    problems.push('CRM_WEBHOOK_USERNAME and CRM_WEBHOOK_PASSWORD go together');
  }
  if (raw.NODE_ENV === 'production' && raw.CRM_STATUS_WEBHOOK_FORMAT === 'conversion' && !raw.CRM_WEBHOOK_USERNAME && !raw.CRM_WEBHOOK_PASSWORD) {
    problems.push("CRM_STATUS_WEBHOOK_FORMAT=conversion needs CRM_WEBHOOK_USERNAME and CRM_WEBHOOK_PASSWORD (the CRM's conversion endpoint takes Basic auth)");
  }
  if (raw.CRM_STATUS_WEBHOOK_BATCH_MAX > 1 && raw.CRM_STATUS_WEBHOOK_FORMAT === 'conversion') {
    problems.push("CRM_STATUS_WEBHOOK_BATCH_MAX must be 1 with CRM_STATUS_WEBHOOK_FORMAT=conversion (the CRM's conversion endpoint takes one event per call)");
  }
  if (raw.CRM_STATUS_WEBHOOK_BATCH_MAX > raw.WEBHOOK_BATCH_SIZE) {
    problems.push('CRM_STATUS_WEBHOOK_BATCH_MAX must not exceed WEBHOOK_BATCH_SIZE (the events claimed at once)');
  }
  if (raw.NODE_ENV === 'production' && raw.CRM_WEBHOOK_SECRET === DEV_WEBHOOK_SECRET) {
    problems.push('CRM_WEBHOOK_SECRET holds the development secret; set a real one in production');
  }
  if (raw.NODE_ENV === 'production') {
    problems.push(
      ...weakSecretProblems('CRM_WEBHOOK_SECRET', raw.CRM_WEBHOOK_SECRET, { development: DEV_WEBHOOK_SECRET }),
      ...weakSecretProblems('CRM_WEBHOOK_PASSWORD', raw.CRM_WEBHOOK_PASSWORD),
      ...weakSecretProblems('CRM_WEBHOOK_API_KEY', raw.CRM_WEBHOOK_API_KEY),
    );
  }
  if (raw.CRM_EVENTS_TRANSPORT === 'rabbitmq') amqpUrlProblems(raw.NODE_ENV, raw.CRM_EVENTS_AMQP_URL, problems);
  if (problems.length) throw new ConfigError(problems);
  return { ...raw, DATABASE_READ_URL: readDatabaseUrl(raw), maxAgeMs: durationMs(raw.WEBHOOK_MAX_AGE), egress };
}

/** TRACKING_SECRET, refused in production while it is the development one, or a weak one. */
export function trackingProblems(env: { NODE_ENV: NodeEnv; TRACKING_SECRET: string }): string[] {
  if (env.NODE_ENV !== 'production') return [];
  if (env.TRACKING_SECRET === DEV_TRACKING_SECRET) return ['TRACKING_SECRET holds the development secret; set a real one in production'];
  return weakSecretProblems('TRACKING_SECRET', env.TRACKING_SECRET);
}
