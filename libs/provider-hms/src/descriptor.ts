import { Type } from '@sinclair/typebox';
import { tokenCheck } from '@operator/contract';
import type { ErrorCode, ProviderInfo } from '@operator/providers';

export const HmsEnv = Type.Object({
  HMS_APP_ID: Type.String({ default: '', description: 'App id of the AppGallery Connect app: the OAuth client id of Push Kit (default brand)' }),
  HMS_APP_SECRET: Type.String({ default: '', description: 'App secret of that app: the OAuth client secret' }),
  HMS_ENDPOINT: Type.String({ default: '', description: 'https origin that takes every Push Kit request instead (the push API and the OAuth token URL): proxies, tests' }),
});

export interface HmsCredential {
  appId: string;
  appSecret: string;
  /** HMS_ENDPOINT: an https origin that takes every request (push API and OAuth token URL). */
  endpoint?: string;
}

/** Push Kit's result codes and what each becomes; an answer without one goes by its HTTP status (hmsOutcome). */
export const HMS_ERRORS: Readonly<Record<string, ErrorCode>> = {
  '80100001': 'payload-invalid',
  '80100002': 'payload-invalid',
  '80100003': 'payload-invalid',
  '80100004': 'payload-invalid',
  '80100013': 'payload-invalid',
  '80100016': 'payload-invalid',
  '80200001': 'auth',
  '80200003': 'auth',
  '80300002': 'auth',
  '80300007': 'invalid-token',
  '80300008': 'payload-too-large',
  '80300010': 'payload-invalid',
  '80300011': 'payload-invalid',
  '81000001': 'unavailable',
};

/** Huawei Push Kit: its settings and its devices, without its client. */
export const hmsInfo: ProviderInfo<HmsCredential> = {
  name: 'hms',
  title: 'HMS',
  token: 'HMS push token',
  // Push Kit's tokens are printable ASCII (today letters, digits, `_`, `-`, `:`), far longer than 20 characters.
  checkDevice: tokenCheck({ pattern: /^[\x21-\x7e]{20,}$/, problem: 'token must be an HMS push token: at least 20 printable ASCII characters, no spaces' }),
  settings: {
    env: HmsEnv,
    variables: { appId: 'HMS_APP_ID', appSecret: 'HMS_APP_SECRET' },
    endpoint: 'HMS_ENDPOINT',
    credential(h, read) {
      if (!read.requireAll({ appId: h.appId, appSecret: h.appSecret })) return undefined;
      return { appId: String(h.appId), appSecret: String(h.appSecret) };
    },
  },
  tuning: { providerConnections: 32 },
};
