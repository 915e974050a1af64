import v8 from 'node:v8';
import { Type, type Static } from '@sinclair/typebox';
import { ConfigError, parseEnv, splitList, type Env } from './env';
import { DatabaseEnv, databaseProblems, MetricsEnv, PushSendEnv, ReadDatabaseEnv, readDatabaseProblems, readDatabaseUrl, RuntimeEnv, nodeEnvOf, type NodeEnv } from './base';
import { RedisEnv, redisConnectionOf, type RedisConnection, type RedisVariable, withoutRedisVariables } from './redis';
import { durationMs, TrackingEnv, trackingProblems, WebhookAgeEnv } from './events';
import { BonusEnv, bonusSettings, type BonusSettings } from './bonus';
import { CrmAuthEnv, crmAuthSettings, type CrmAuthSettings } from './crm-auth';
import { WebPushOriginsEnv, webpushAllowedOriginsOf, type AllowedOrigin } from './origins';
import { EdgeEnv, edgeSettings, type EdgeSettings } from './edge';
import { VapidPublicKeysEnv, vapidPublicKeysOf, type VapidPublicKeys } from './vapid';
import { weakSecretProblems } from './secrets';
import { boundList, type BoundKey } from './brands';

// One schema per concern. Every variable has a development default, so a fresh checkout runs with
// no configuration; production refuses the development keys and every weak secret (secrets.ts).

export const DEV_OPERATOR_KEY = 'dev-operator-key';
export const DEV_INTERNAL_KEY = 'dev-internal-key';

export const GatewayEnv = Type.Object({
  HOST: Type.String({ default: '0.0.0.0', description: 'Address the gateway listens on' }),
  PORT: Type.Integer({ default: 3000, minimum: 0, maximum: 65535, description: 'Port the gateway listens on' }),
  OPERATOR_API_KEYS: Type.String({ default: DEV_OPERATOR_KEY, description: 'Comma-separated X-Api-Key values the CRM may use; KEY@7+8 opens brands 7 and 8 only' }),
  INTERNAL_API_KEYS: Type.String({
    default: DEV_INTERNAL_KEY,
    description: "Comma-separated X-Api-Key values of the operator's own back end that open every internal route, as INTERNAL_ADMIN_KEYS do (the default only while no internal key of any class is set)",
  }),
  INTERNAL_DEVICE_KEYS: Type.String({ default: '', description: 'Comma-separated X-Api-Key values that register, list and remove devices, and open nothing else; KEY@7 opens brand 7 only' }),
  INTERNAL_ADMIN_KEYS: Type.String({
    default: '',
    description: 'Comma-separated X-Api-Key values that open every internal route: devices, the bonus catalog, wallets, ledgers, player bonuses, credits, dead letters, the queue dashboard (not with KEY@7, which opens brand 7 only)',
  }),
  CRM_HEADER_WORD: Type.String({ default: 'Service', pattern: '^[A-Za-z0-9]+$', description: 'Middle word of the X-<Word>-* headers' }),
  BODY_LIMIT_BYTES: Type.Integer({ default: 5 * 1024 * 1024, minimum: 1024, description: 'Largest request body accepted (413 above)' }),
  BATCH_MAX_MESSAGES: Type.Integer({ default: 500, minimum: 1, description: 'Messages handled per batch request; the rest are left for the CRM to resend' }),
  PUSH_JOB_MAX_MESSAGES: Type.Integer({ default: 500, minimum: 1, description: 'Messages per send job of a batch (and of a group of singles)' }),
  PUSH_DEDUPE_DAYS: Type.Integer({
    default: 2,
    minimum: 0,
    maximum: 366,
    description: 'A push whose activity.id was accepted this many days before today (UTC) or since is answered with its first push_id; each day costs one index lookup per message',
  }),
  PUSH_SINGLE_GROUP_WINDOW_MS: Type.Integer({
    default: 2,
    minimum: 0,
    maximum: 1000,
    description: 'While a group of single pushes is being stored, how long the next one gathers at least; it is stored once that group is done or has stalled, or once full (0: at least those of one event-loop turn)',
  }),
  PUSH_SINGLE_GROUP_MAX: Type.Integer({ default: 500, minimum: 1, description: 'Single pushes stored together at most; a full group is stored at once (1: no grouping)' }),
  MAX_EVENT_LOOP_DELAY_MS: Type.Integer({ default: 1000, minimum: 0, description: 'Above this event-loop delay requests are shed with 503 and Retry-After (0: off)' }),
  MAX_HEAP_USED_BYTES: Type.Optional(
    Type.Integer({
      minimum: 0,
      description: "Above this live JavaScript heap requests are shed with 503 and Retry-After (0: off); unset: three quarters of the V8 heap limit, which Node derives from the container's memory",
    }),
  ),
  REQUEST_TIMEOUT_MS: Type.Integer({ default: 30000, minimum: 1000, description: "A request's headers and body must arrive within this; past it the answer is 408 and the connection is closed" }),
  ADMIN_UI: Type.Boolean({ default: false, description: 'Serve the queue dashboard at /admin/queues (admin key; in production on METRICS_PORT only); false: 404' }),
});

export const GatewayConfigSchema = Type.Composite([RuntimeEnv, DatabaseEnv, ReadDatabaseEnv, RedisEnv, MetricsEnv, GatewayEnv, CrmAuthEnv, PushSendEnv, TrackingEnv, WebhookAgeEnv, BonusEnv, WebPushOriginsEnv, EdgeEnv, VapidPublicKeysEnv]);
type GatewayRaw = Static<typeof GatewayConfigSchema>;

type CrmAuthVariable = keyof typeof CrmAuthEnv.properties;
type KeyVariable = 'OPERATOR_API_KEYS' | 'INTERNAL_API_KEYS' | 'INTERNAL_DEVICE_KEYS' | 'INTERNAL_ADMIN_KEYS';

/** The X-Api-Key values of the operator's own back end, by the routes they open, each with its brands. */
export interface InternalKeys {
  /** Open the device routes: INTERNAL_DEVICE_KEYS, INTERNAL_ADMIN_KEYS and INTERNAL_API_KEYS. */
  devices: BoundKey[];
  /** Open every internal route, and the queue dashboard when bound to no brand: INTERNAL_ADMIN_KEYS and INTERNAL_API_KEYS. */
  admin: BoundKey[];
}

export type GatewayConfig = Omit<GatewayRaw, KeyVariable | CrmAuthVariable | RedisVariable | 'WEBPUSH_ALLOWED_ORIGINS' | 'VAPID_PUBLIC_KEY' | 'VAPID_PUBLIC_KEYS' | 'MAX_HEAP_USED_BYTES'> & {
  /** MAX_HEAP_USED_BYTES, or three quarters of the V8 heap limit when it is unset; 0: off. */
  MAX_HEAP_USED_BYTES: number;
  redis: RedisConnection;
  operatorApiKeys: BoundKey[];
  internalKeys: InternalKeys;
  webhookMaxAgeMs: number;
  bonus: BonusSettings;
  crmAuth: CrmAuthSettings;
  webpushAllowedOrigins: AllowedOrigin[];
  /** Proxies believed, authentication failures, GET /oauth/token, tracking tokens' lifetime. */
  edge: EdgeSettings;
  /** The VAPID public keys answered to browsers, by brand. */
  vapidPublicKeys: VapidPublicKeys;
};

/**
 * Three quarters of the heap V8 may grow to: Node sizes that limit from the memory it may use (the
 * container's limit), so shedding starts before the heap runs out, whatever the container.
 */
export function defaultMaxHeapUsedBytes(): number {
  return Math.floor(v8.getHeapStatistics().heap_size_limit * 0.75);
}

type KeyLists = Record<KeyVariable, string[]>;

/**
 * The keys of each class, `@brands` taken off. INTERNAL_API_KEYS falls back to the development key
 * only while no internal key of any class is set, so a deployment may give scoped keys alone.
 */
function keyListsOf(env: Env, problems: string[]): { keys: KeyLists; bound: Record<KeyVariable, BoundKey[]> } {
  const list = (name: KeyVariable, text: string) => boundList(name, splitList(text), problems);
  const INTERNAL_DEVICE_KEYS = list('INTERNAL_DEVICE_KEYS', env.INTERNAL_DEVICE_KEYS ?? '');
  const INTERNAL_ADMIN_KEYS = list('INTERNAL_ADMIN_KEYS', env.INTERNAL_ADMIN_KEYS ?? '');
  const scoped = INTERNAL_DEVICE_KEYS.length > 0 || INTERNAL_ADMIN_KEYS.length > 0;
  const bound = {
    OPERATOR_API_KEYS: list('OPERATOR_API_KEYS', env.OPERATOR_API_KEYS || DEV_OPERATOR_KEY),
    INTERNAL_API_KEYS: list('INTERNAL_API_KEYS', env.INTERNAL_API_KEYS || (scoped ? '' : DEV_INTERNAL_KEY)),
    INTERNAL_DEVICE_KEYS,
    INTERNAL_ADMIN_KEYS,
  };
  const keys = Object.fromEntries(Object.entries(bound).map(([name, list]) => [name, list.map(({ key }) => key)])) as KeyLists;
  return { keys, bound };
}

/** Keys exist, each class apart and each once, and in production neither the development ones nor weak. */
function keyProblems(nodeEnv: NodeEnv | undefined, keys: KeyLists): string[] {
  const problems: string[] = [];
  for (const [name, list] of Object.entries(keys)) {
    if (new Set(list).size < list.length) problems.push(`${name} names a key twice`);
  }
  const internal = [...keys.INTERNAL_API_KEYS, ...keys.INTERNAL_DEVICE_KEYS, ...keys.INTERNAL_ADMIN_KEYS];
  if (!keys.OPERATOR_API_KEYS.length) problems.push('OPERATOR_API_KEYS must name at least one key');
  if (!internal.length) problems.push('INTERNAL_API_KEYS must name at least one key');
  const classes = Object.entries(keys) as [KeyVariable, string[]][];
  classes.forEach(([name, list], index) => {
    for (const [other, otherList] of classes.slice(index + 1)) {
      if (list.some((key) => otherList.includes(key))) problems.push(`${name} and ${other} must not share a key`);
    }
  });
  if (nodeEnv === 'production') {
    if (keys.OPERATOR_API_KEYS.includes(DEV_OPERATOR_KEY)) problems.push('OPERATOR_API_KEYS holds the development key; set real keys in production');
    if (keys.INTERNAL_API_KEYS.includes(DEV_INTERNAL_KEY)) problems.push('INTERNAL_API_KEYS holds the development key; set real keys in production');
    problems.push(
      ...weakSecretProblems('OPERATOR_API_KEYS', keys.OPERATOR_API_KEYS, { development: DEV_OPERATOR_KEY }),
      ...weakSecretProblems('INTERNAL_API_KEYS', keys.INTERNAL_API_KEYS, { development: DEV_INTERNAL_KEY }),
      ...weakSecretProblems('INTERNAL_DEVICE_KEYS', keys.INTERNAL_DEVICE_KEYS),
      ...weakSecretProblems('INTERNAL_ADMIN_KEYS', keys.INTERNAL_ADMIN_KEYS),
    );
  }
  return problems;
}

/** Every brand a credential's @brands or BONUS_DEFAULT_BRAND names: the brands the metrics label by id. */
export function namedBrands(config: Pick<GatewayConfig, 'operatorApiKeys' | 'internalKeys' | 'crmAuth' | 'BONUS_DEFAULT_BRAND'>): string[] {
  const bound = [...config.operatorApiKeys, ...config.internalKeys.devices, ...config.crmAuth.basicUsers, ...config.crmAuth.oauthClients];
  return [...new Set([...bound.flatMap(({ brands }) => brands ?? []), String(config.BONUS_DEFAULT_BRAND)])];
}

export function loadGatewayConfig(env: Env = process.env): GatewayConfig {
  const problems: string[] = [];
  const { keys, bound } = keyListsOf(env, problems);
  const redis = redisConnectionOf(env);
  const webpushOrigins = webpushAllowedOriginsOf(env);
  const vapid = vapidPublicKeysOf(env);
  problems.push(...redis.problems, ...keyProblems(nodeEnvOf(env), keys), ...webpushOrigins.problems, ...vapid.problems);
  let raw: GatewayRaw | undefined;
  try {
    raw = parseEnv(GatewayConfigSchema, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.unshift(...error.problems);
  }
  const bonus = raw ? bonusSettings(raw, raw.NODE_ENV) : undefined;
  const crmAuth = raw ? crmAuthSettings(raw) : undefined;
  const edge = raw ? edgeSettings(raw) : undefined;
  if (raw) problems.push(...databaseProblems(raw), ...readDatabaseProblems(raw), ...trackingProblems(raw), ...bonus!.problems, ...crmAuth!.problems, ...edge!.problems);
  if (problems.length || !raw) throw new ConfigError(problems);
  const {
    OPERATOR_API_KEYS: _o,
    INTERNAL_API_KEYS: _i,
    INTERNAL_DEVICE_KEYS: _d,
    INTERNAL_ADMIN_KEYS: _m,
    CRM_AUTH: _a,
    CRM_BASIC_USERS: _b,
    CRM_OAUTH_CLIENTS: _c,
    CRM_OAUTH_TOKEN_TTL: _t,
    CRM_OAUTH_SIGNING_KEYS: _k,
    WEBPUSH_ALLOWED_ORIGINS: _w,
    VAPID_PUBLIC_KEY: _v,
    VAPID_PUBLIC_KEYS: _vs,
    ...rest
  } = raw;
  const admin = [...bound.INTERNAL_ADMIN_KEYS, ...bound.INTERNAL_API_KEYS];
  return {
    ...withoutRedisVariables(rest),
    MAX_HEAP_USED_BYTES: raw.MAX_HEAP_USED_BYTES ?? defaultMaxHeapUsedBytes(),
    DATABASE_READ_URL: readDatabaseUrl(raw),
    redis: redis.connection,
    operatorApiKeys: bound.OPERATOR_API_KEYS,
    internalKeys: { devices: [...bound.INTERNAL_DEVICE_KEYS, ...admin], admin },
    webhookMaxAgeMs: durationMs(raw.WEBHOOK_MAX_AGE),
    bonus: bonus!.settings,
    crmAuth: crmAuth!.settings,
    webpushAllowedOrigins: webpushOrigins.origins,
    edge: edge!.settings,
    vapidPublicKeys: vapid.keys,
  };
}
