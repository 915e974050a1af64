import { Type, type Static } from '@sinclair/typebox';
import { ConfigError, parseEnv, type Env } from './env';
import { DatabaseEnv, databaseProblems, EgressEnv, ReadDatabaseEnv, readDatabaseProblems, readDatabaseUrl, egressSettings, MetricsEnv, outboundUrlProblems, RuntimeEnv, type EgressSettings, type NodeEnv } from './base';
import { weakSecretProblems } from './secrets';

/** Crediting and bonus events: read by the gateway (status changes) and the bonus app. */
export const BonusEnv = Type.Object({
  BONUS_PLATFORM_URL: Type.String({ default: '', description: "Where credits are POSTed on the operator's own platform; empty: the built-in ledger" }),
  BONUS_PLATFORM_API_KEY: Type.String({ default: '', description: 'X-Api-Key sent to BONUS_PLATFORM_URL' }),
  BONUS_PLATFORM_TIMEOUT_MS: Type.Integer({ default: 10000, minimum: 100, description: 'Time to wait for the platform to answer a credit' }),
  BONUS_MAX_ATTEMPTS: Type.Integer({ default: 12, minimum: 1, description: 'Tries of a credit that keeps failing (the platform refusing transiently, or its recording failing) before it is failed' }),
  BONUS_BACKOFF_MS: Type.Integer({ default: 2000, minimum: 1, description: 'Base of the exponential backoff between tries' }),
  BONUS_CONCURRENCY: Type.Integer({ default: 8, minimum: 1, maximum: 256, description: 'Credits one bonus app carries out at once (posts to the platform in flight)' }),
  BONUS_POLL_MS: Type.Integer({ default: 200, minimum: 10, description: 'Pause of the bonus app between rounds when idle' }),
  BONUS_DEFAULT_BRAND: Type.Integer({
    default: 0,
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    description:
      'The brand (activity.brand_id) of a bonus request whose credential opens several brands or every brand; a credential bound to one brand credits that one. A credential that opens several brands without this one is refused 403',
  }),
  EVENTS_ORIGIN: Type.String({ default: 'operator', minLength: 1, description: 'The origin field of bonus and balance events' }),
  EXCHANGE_RATES: Type.String({ default: '{}', description: 'JSON map of currency to the rate the CRM wants in events, e.g. {"USD":0.92}; 1 when absent' }),
});

export interface BonusSettings {
  platformUrl: string | undefined;
  exchangeRates: Record<string, number>;
}

/** Checks BonusEnv values that the schema cannot: a URL, the rates' JSON, and in production the platform's key. */
export function bonusSettings(raw: Static<typeof BonusEnv>, nodeEnv: NodeEnv): { settings: BonusSettings; problems: string[] } {
  const problems: string[] = [];
  let exchangeRates: Record<string, number> = {};
  try {
    const parsed = JSON.parse(raw.EXCHANGE_RATES);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed) || !Object.values(parsed).every((v) => typeof v === 'number' && v > 0)) {
      throw new Error();
    }
    exchangeRates = parsed;
  } catch {
    problems.push('EXCHANGE_RATES must be a JSON object of positive numbers, like {"USD":0.92}');
  }
  problems.push(...outboundUrlProblems('BONUS_PLATFORM_URL', raw.BONUS_PLATFORM_URL, nodeEnv));
  if (nodeEnv === 'production') problems.push(...weakSecretProblems('BONUS_PLATFORM_API_KEY', raw.BONUS_PLATFORM_API_KEY));
  return { settings: { platformUrl: raw.BONUS_PLATFORM_URL || undefined, exchangeRates }, problems };
}

export const BonusAppSchema = Type.Composite([RuntimeEnv, DatabaseEnv, ReadDatabaseEnv, MetricsEnv, EgressEnv, BonusEnv, Type.Object({ CRM_HEADER_WORD: Type.String({ default: 'Service', pattern: '^[A-Za-z0-9]+$' }) })]);
export type BonusAppConfig = Static<typeof BonusAppSchema> & { bonus: BonusSettings; egress: EgressSettings };

export function loadBonusAppConfig(env: Env = process.env): BonusAppConfig {
  const raw = parseEnv(BonusAppSchema, env);
  const { settings, problems } = bonusSettings(raw, raw.NODE_ENV);
  const { egress, problems: egressProblems } = egressSettings(raw, env);
  problems.unshift(...databaseProblems(raw), ...readDatabaseProblems(raw));
  problems.push(...egressProblems);
  if (problems.length) throw new ConfigError(problems);
  return { ...raw, DATABASE_READ_URL: readDatabaseUrl(raw), bonus: settings, egress };
}
