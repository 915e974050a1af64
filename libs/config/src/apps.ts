import { Type, type TObject } from '@sinclair/typebox';
import { BonusAppSchema } from './bonus';
import { GatewayConfigSchema } from './config';
import { DispatcherConfigSchema } from './events';
import { ApnsEnv, FcmEnv, HmsEnv, OneSignalEnv, WebPushEnv, WorkerConfigSchema } from './push';
import type { ProviderName } from '@operator/contract';

// What each app of the stack reads from its environment: all a deployment must set for it, and all
// it may set. The checks of deploy/ hold the Kubernetes manifests and docker-compose.yml to it.

const PROVIDER_ENV: Record<ProviderName, TObject> = { fcm: FcmEnv, apns: ApnsEnv, webpush: WebPushEnv, hms: HmsEnv, onesignal: OneSignalEnv };

/** A push worker parses every provider's variables but uses only those of its own provider. */
function pushWorkerSchema(provider: ProviderName): TObject {
  const others = Object.entries(PROVIDER_ENV)
    .filter(([name]) => name !== provider)
    .flatMap(([, schema]) => Object.keys(schema.properties));
  return Type.Omit(WorkerConfigSchema, others);
}

/** Keyed by the app's name in tools/apps.mjs (dist/apps/<name>/main.js). */
export const APP_CONFIG_SCHEMAS: Record<string, TObject> = {
  gateway: GatewayConfigSchema,
  'push-worker-fcm': pushWorkerSchema('fcm'),
  'push-worker-apns': pushWorkerSchema('apns'),
  'push-worker-webpush': pushWorkerSchema('webpush'),
  'push-worker-hms': pushWorkerSchema('hms'),
  'push-worker-onesignal': pushWorkerSchema('onesignal'),
  bonus: BonusAppSchema,
  'webhook-dispatcher': DispatcherConfigSchema,
};
