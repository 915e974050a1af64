import { Type, type TObject } from '@sinclair/typebox';
import {
  BonusAppSchema,
  DispatcherConfigSchema,
  GatewayConfigSchema,
  loadWorkerConfigOf,
  pushTuning as tuningFrom,
  tuningRow,
  WorkerBaseSchema,
  type Env,
  type PushTuning,
  type PushWorkerConfig,
} from '@operator/config';
import { PROVIDERS, providerInfo } from './registry';

/** Every variable a push worker parses: the shared ones and every provider's (it uses only its own provider's). */
export const WorkerConfigSchema = Type.Composite([WorkerBaseSchema, ...PROVIDERS.map((provider) => provider.settings.env)]);

/** Each provider's row of the tuning table: the default row with its descriptor's own values. */
export const PUSH_TUNING: Readonly<Record<string, Readonly<PushTuning>>> = Object.fromEntries(PROVIDERS.map((provider) => [provider.name, tuningRow(provider.tuning)]));

/** The configuration of the named provider's worker (see loadWorkerConfigOf). */
export function loadPushWorkerConfig<C = any>(name: string, env: Env = process.env): PushWorkerConfig<C> {
  return loadWorkerConfigOf(providerInfo(name), WorkerConfigSchema, env) as PushWorkerConfig<C>;
}

/** The named provider's tuning from the environment. */
export function pushTuning(name: string, env: Env = process.env): PushTuning {
  return tuningFrom(PUSH_TUNING[providerInfo(name).name], env);
}

/** A push worker parses every provider's variables; a deployment sets only its own provider's. */
function pushWorkerSchema(name: string): TObject {
  const others = PROVIDERS.filter((provider) => provider.name !== name).flatMap((provider) => Object.keys(provider.settings.env.properties));
  return Type.Omit(WorkerConfigSchema, others);
}

// What each app of the stack reads from its environment: all a deployment must set for it, and all
// it may set. The checks of deploy/ hold the Kubernetes manifests and docker-compose.yml to it.
/** Keyed by the app's name in tools/apps.mjs (dist/apps/<name>/main.js). */
export const APP_CONFIG_SCHEMAS: Record<string, TObject> = {
  gateway: GatewayConfigSchema,
  ...Object.fromEntries(PROVIDERS.map((provider) => [`push-worker-${provider.name}`, pushWorkerSchema(provider.name)])),
  bonus: BonusAppSchema,
  'webhook-dispatcher': DispatcherConfigSchema,
};
