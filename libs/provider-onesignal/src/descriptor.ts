import { Type } from '@sinclair/typebox';
import { tokenCheck } from '@operator/contract';
import type { ErrorCode, ProviderInfo } from '@operator/providers';

export const OneSignalEnv = Type.Object({
  ONESIGNAL_APP_ID: Type.String({ default: '', description: 'OneSignal app id (default brand)' }),
  ONESIGNAL_REST_API_KEY: Type.String({ default: '', description: "The app's REST API key" }),
  ONESIGNAL_ENDPOINT: Type.String({ default: '', description: 'https origin that takes every OneSignal request instead of https://api.onesignal.com: proxies, tests' }),
});

export interface OneSignalCredential {
  appId: string;
  restApiKey: string;
  /** ONESIGNAL_ENDPOINT: an https origin that takes every request. */
  endpoint?: string;
}

/** OneSignal's answers and what each becomes (the provider's resultsOf reads them). */
export const ONESIGNAL_ERRORS: Readonly<Record<string, ErrorCode>> = {
  invalid_player_ids: 'unregistered',
  'All included players are not subscribed': 'unregistered',
  'HTTP 400': 'payload-invalid',
  'HTTP 401': 'auth',
  'HTTP 403': 'auth',
  'HTTP 404': 'auth',
  'HTTP 408': 'unavailable',
  'HTTP 413': 'payload-too-large',
  'HTTP 429': 'rate-limited',
  'HTTP 5xx': 'unavailable',
};

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** OneSignal (REST API): its settings and its devices, without its client. */
export const oneSignalInfo: ProviderInfo<OneSignalCredential> = {
  name: 'onesignal',
  title: 'OneSignal',
  token: 'OneSignal subscription id (a UUID)',
  // OneSignal names a device by its subscription id (formerly player id).
  checkDevice: tokenCheck({ pattern: UUID, problem: 'token must be a OneSignal subscription id (a UUID)' }),
  settings: {
    env: OneSignalEnv,
    variables: { appId: 'ONESIGNAL_APP_ID', restApiKey: 'ONESIGNAL_REST_API_KEY' },
    endpoint: 'ONESIGNAL_ENDPOINT',
    credential(o, read) {
      if (!read.requireAll({ appId: o.appId, restApiKey: o.restApiKey })) return undefined;
      if (!UUID.test(String(o.appId))) read.problem('the OneSignal app id must be a UUID');
      return { appId: String(o.appId), restApiKey: String(o.restApiKey) };
    },
  },
  tuning: { providerConnections: 32 },
};
