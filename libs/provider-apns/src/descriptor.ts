import { Type } from '@sinclair/typebox';
import { tokenCheck } from '@operator/contract';
import type { ErrorCode, ProviderInfo } from '@operator/providers';

export const ApnsEnv = Type.Object({
  APNS_KEY_FILE: Type.String({ default: '', description: 'The .p8 signing key from Apple (default brand)' }),
  APNS_KEY_ID: Type.String({ default: '', description: 'Key id of that key' }),
  APNS_TEAM_ID: Type.String({ default: '', description: 'Apple developer team id' }),
  APNS_TOPIC: Type.String({ default: '', description: 'The app bundle id' }),
  APNS_PRODUCTION: Type.Boolean({ default: false, description: 'true: api.push.apple.com; false: the sandbox endpoint' }),
  APNS_HOST: Type.String({ default: '', description: 'Overrides the APNs host (proxies, tests)' }),
  APNS_PORT: Type.Integer({ default: 443, minimum: 1, maximum: 65535, description: 'Overrides the APNs port' }),
});

export interface ApnsCredential {
  /** The provider token signing key (.p8, PEM). */
  key: string;
  keyId: string;
  teamId: string;
  /** The app's bundle id: the apns-topic of every push. */
  topic: string;
  /** api.push.apple.com when true, api.sandbox.push.apple.com when false (unless host is given). */
  production: boolean;
  /** Another APNs host (a local fake); the TLS server name is this host. */
  host?: string;
  port?: number;
}

/** APNs' reasons and what each becomes; a status without a known reason decides alone (apnsError). */
export const APNS_ERRORS: Readonly<Record<string, ErrorCode>> = {
  Unregistered: 'unregistered',
  BadDeviceToken: 'invalid-token',
  DeviceTokenNotForTopic: 'invalid-token',
  TooManyProviderTokenUpdates: 'rate-limited',
  TooManyRequests: 'rate-limited',
  ExpiredProviderToken: 'unavailable',
  InternalServerError: 'unavailable',
  ServiceUnavailable: 'unavailable',
  Shutdown: 'unavailable',
  IdleTimeout: 'unavailable',
  TopicDisallowed: 'auth',
  BadTopic: 'auth',
  MissingTopic: 'auth',
  BadCertificate: 'auth',
  BadCertificateEnvironment: 'auth',
  InvalidProviderToken: 'auth',
  MissingProviderToken: 'auth',
  BadEnvironmentKeyInToken: 'auth',
  PayloadTooLarge: 'payload-too-large',
};

/** Apple Push Notification service (HTTP/2, token auth): its settings and its devices, without its client. */
export const apnsInfo: ProviderInfo<ApnsCredential> = {
  name: 'apns',
  title: 'APNs',
  token: 'APNs device token (hex)',
  checkDevice: tokenCheck({ pattern: /^[0-9a-fA-F]{16,400}$/, problem: 'token must be a hex APNs device token' }),
  settings: {
    env: ApnsEnv,
    variables: { keyFile: 'APNS_KEY_FILE', keyId: 'APNS_KEY_ID', teamId: 'APNS_TEAM_ID', topic: 'APNS_TOPIC' },
    optionalVariables: { production: 'APNS_PRODUCTION', host: 'APNS_HOST', port: 'APNS_PORT' },
    credential(a, read) {
      if (!read.requireAll({ keyFile: a.keyFile, keyId: a.keyId, teamId: a.teamId, topic: a.topic })) return undefined;
      const key = read.readText(a.keyFile as string);
      if (key === undefined) return undefined;
      const text = (value: unknown) => value as string;
      return { key, keyId: text(a.keyId), teamId: text(a.teamId), topic: text(a.topic), production: a.production === true, host: text(a.host) || undefined, port: a.port as number | undefined };
    },
  },
  tuning: { providerConnections: 4, sendTimeoutMs: 5000 },
};
