import { Type } from '@sinclair/typebox';
import { tokenCheck } from '@operator/contract';
import type { ProviderInfo } from '@operator/providers';

export const FcmEnv = Type.Object({
  FCM_SERVICE_ACCOUNT_FILE: Type.String({ default: '', description: 'Service account JSON of the Firebase project (default brand)' }),
  FCM_ENDPOINT: Type.String({ default: '', description: 'https origin every FCM connection goes to instead (the FCM API and the OAuth token URL, real host names kept for TLS): proxies, tests' }),
});

export interface FcmCredential {
  serviceAccount: { project_id: string; client_email: string; private_key: string };
  /** FCM_ENDPOINT: an https origin that takes every connection (FCM API and OAuth token URL). */
  endpoint?: string;
}

/** Firebase Cloud Messaging (HTTP v1 API): its settings and its devices, without its client. */
export const fcmInfo: ProviderInfo<FcmCredential> = {
  name: 'fcm',
  title: 'FCM',
  token: 'FCM registration token',
  checkDevice: tokenCheck(),
  settings: {
    env: FcmEnv,
    variables: { serviceAccountFile: 'FCM_SERVICE_ACCOUNT_FILE' },
    endpoint: 'FCM_ENDPOINT',
    credential(entry, read) {
      const path = entry.serviceAccountFile;
      if (!read.requireAll({ serviceAccountFile: path })) return undefined;
      const text = read.readText(String(path));
      if (text === undefined) return undefined;
      try {
        const account = JSON.parse(text);
        for (const field of ['project_id', 'client_email', 'private_key']) {
          if (typeof account[field] !== 'string' || !account[field]) read.problem(`${path} has no ${field}`);
        }
        return { serviceAccount: account };
      } catch {
        read.problem(`${path} is not JSON`);
        return undefined;
      }
    },
  },
  tuning: {},
};
