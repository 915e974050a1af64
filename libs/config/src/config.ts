import { Type, type Static } from '@sinclair/typebox';
import { ConfigError, parseEnv, splitList, type Env } from './env';
import { DatabaseEnv, databaseProblems, PushSendEnv, RuntimeEnv } from './base';
import { RedisEnv, redisConnectionOf, type RedisConnection, type RedisVariable, withoutRedisVariables } from './redis';
import { durationMs, TrackingEnv, trackingProblems, WebhookAgeEnv } from './events';
import { BonusEnv, bonusSettings, type BonusSettings } from './bonus';
import { CrmAuthEnv, crmAuthSettings, type CrmAuthSettings } from './crm-auth';
import { WebPushOriginsEnv, webpushAllowedOriginsOf, type AllowedOrigin } from './origins';
import { weakSecretProblems } from './secrets';

// One schema per concern. Every variable has a development default, so a fresh checkout runs with
// no configuration; production refuses the development keys and every weak secret (secrets.ts).

export const DEV_OPERATOR_KEY = 'dev-operator-key';
export const DEV_INTERNAL_KEY = 'dev-internal-key';

export const GatewayEnv = Type.Object({
  HOST: Type.String({ default: '0.0.0.0', description: 'Address the gateway listens on' }),
  PORT: Type.Integer({ default: 3000, minimum: 0, maximum: 65535, description: 'Port the gateway listens on' }),
  OPERATOR_API_KEYS: Type.String({ default: DEV_OPERATOR_KEY, description: 'Comma-separated X-Api-Key values the CRM may use' }),
  INTERNAL_API_KEYS: Type.String({ default: DEV_INTERNAL_KEY, description: "Comma-separated X-Api-Key values of the operator's own back end (/v1)" }),
  CRM_HEADER_WORD: Type.String({ default: 'Service', pattern: '^[A-Za-z0-9]+$', description: 'Middle word of the X-<Word>-* headers' }),
  BODY_LIMIT_BYTES: Type.Integer({ default: 5 * 1024 * 1024, minimum: 1024, description: 'Largest request body accepted (413 above)' }),
  BATCH_MAX_MESSAGES: Type.Integer({ default: 500, minimum: 1, description: 'Messages handled per batch request; the rest are left for the CRM to resend' }),
  PUSH_JOB_MAX_MESSAGES: Type.Integer({ default: 100, minimum: 1, description: 'Messages per send job of a batch (and of a group of singles)' }),
  PUSH_SINGLE_GROUP_WINDOW_MS: Type.Integer({
    default: 2,
    minimum: 0,
    maximum: 1000,
    description: 'While a group of single pushes is being stored, how long the next one gathers before it is stored too (0: those of one event-loop turn)',
  }),
  PUSH_SINGLE_GROUP_MAX: Type.Integer({ default: 500, minimum: 1, description: 'Single pushes stored together at most; a full group is stored at once (1: no grouping)' }),
  MAX_EVENT_LOOP_DELAY_MS: Type.Integer({ default: 1000, minimum: 0, description: 'Above this event-loop delay requests are shed with 503 and Retry-After (0: off)' }),
  ADMIN_UI: Type.Boolean({ default: true, description: 'Serve the queue dashboard at /admin/queues (internal key); false: 404' }),
});

export const GatewayConfigSchema = Type.Composite([RuntimeEnv, DatabaseEnv, RedisEnv, GatewayEnv, CrmAuthEnv, PushSendEnv, TrackingEnv, WebhookAgeEnv, BonusEnv, WebPushOriginsEnv]);
type GatewayRaw = Static<typeof GatewayConfigSchema>;

/** The CRM's credentials are read into `crmAuth` only. */
type CrmAuthVariable = keyof typeof CrmAuthEnv.properties;

export type GatewayConfig = Omit<GatewayRaw, 'OPERATOR_API_KEYS' | 'INTERNAL_API_KEYS' | CrmAuthVariable | RedisVariable | 'WEBPUSH_ALLOWED_ORIGINS'> & {
  redis: RedisConnection;
  operatorApiKeys: string[];
  internalApiKeys: string[];
  webhookMaxAgeMs: number;
  bonus: BonusSettings;
  crmAuth: CrmAuthSettings;
  /** WEBPUSH_ALLOWED_ORIGINS: where a registered Web Push subscription may point. */
  webpushAllowedOrigins: AllowedOrigin[];
};

/**
 * Checks that span variables: the keys must exist, be distinct per class, and in production be
 * neither the development ones nor weak.
 */
function keyProblems(env: Env, operatorApiKeys: string[], internalApiKeys: string[]): string[] {
  const problems: string[] = [];
  if (!operatorApiKeys.length) problems.push('OPERATOR_API_KEYS must name at least one key');
  if (!internalApiKeys.length) problems.push('INTERNAL_API_KEYS must name at least one key');
  if (operatorApiKeys.some((key) => internalApiKeys.includes(key))) {
    problems.push('OPERATOR_API_KEYS and INTERNAL_API_KEYS must not share a key');
  }
  if (env.NODE_ENV === 'production') {
    if (operatorApiKeys.includes(DEV_OPERATOR_KEY)) problems.push('OPERATOR_API_KEYS holds the development key; set real keys in production');
    if (internalApiKeys.includes(DEV_INTERNAL_KEY)) problems.push('INTERNAL_API_KEYS holds the development key; set real keys in production');
    problems.push(
      ...weakSecretProblems('OPERATOR_API_KEYS', operatorApiKeys, { development: DEV_OPERATOR_KEY }),
      ...weakSecretProblems('INTERNAL_API_KEYS', internalApiKeys, { development: DEV_INTERNAL_KEY }),
    );
  }
  return problems;
}

export function loadGatewayConfig(env: Env = process.env): GatewayConfig {
  const operatorApiKeys = splitList(env.OPERATOR_API_KEYS || DEV_OPERATOR_KEY);
  const internalApiKeys = splitList(env.INTERNAL_API_KEYS || DEV_INTERNAL_KEY);
  const redis = redisConnectionOf(env);
  const webpushOrigins = webpushAllowedOriginsOf(env);
  const problems = [...redis.problems, ...keyProblems(env, operatorApiKeys, internalApiKeys), ...webpushOrigins.problems];
  let raw: GatewayRaw | undefined;
  try {
    raw = parseEnv(GatewayConfigSchema, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.unshift(...error.problems);
  }
  const bonus = raw ? bonusSettings(raw, raw.NODE_ENV) : undefined;
  const crmAuth = raw ? crmAuthSettings(raw) : undefined;
  if (raw) problems.push(...databaseProblems(raw), ...trackingProblems(raw), ...bonus!.problems, ...crmAuth!.problems);
  if (problems.length || !raw) throw new ConfigError(problems);
  const { OPERATOR_API_KEYS: _o, INTERNAL_API_KEYS: _i, CRM_AUTH: _a, CRM_BASIC_USERS: _b, CRM_OAUTH_CLIENTS: _c, CRM_OAUTH_TOKEN_TTL: _t, CRM_OAUTH_SIGNING_KEYS: _k, WEBPUSH_ALLOWED_ORIGINS: _w, ...rest } = raw;
  return {
    ...withoutRedisVariables(rest),
    redis: redis.connection,
    operatorApiKeys,
    internalApiKeys,
    webhookMaxAgeMs: durationMs(raw.WEBHOOK_MAX_AGE),
    bonus: bonus!.settings,
    crmAuth: crmAuth!.settings,
    webpushAllowedOrigins: webpushOrigins.origins,
  };
}
