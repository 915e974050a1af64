import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import type { Credential, GoogleOAuthAccessToken } from 'firebase-admin/app';
import { OutboundError, requestToken, sanitizeReason, type Outbound, type OutboundAnswer } from '@operator/egress';
import type { CredentialFailure } from './errors';

// Google's OAuth2 JWT-bearer grant for a service account (firebase-admin's cert()), posted on the
// house's outbound client over the provider's connections.

export interface FcmServiceAccount {
  project_id: string;
  client_email: string;
  private_key: string;
}

export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
const FCM_SCOPES = ['https://www.googleapis.com/auth/firebase.messaging', 'https://www.googleapis.com/auth/cloud-platform'];
const TOKEN_TIMEOUT_MS = 10_000;
/** Google's answers are well under 2 KiB; the rest is dropped. */
const MAX_TOKEN_ANSWER_BYTES = 8192;
/** A kept-alive connection the server had closed, as node and undici report it. */
const RESET = new Set(['ECONNRESET', 'UND_ERR_SOCKET']);

export class GoogleTokenError extends Error {
  constructor(
    message: string,
    readonly failure: CredentialFailure,
  ) {
    super(message);
    this.name = 'GoogleTokenError';
  }
}

export interface ServiceAccountCredential extends Credential {
  /** Why the last token request failed; null once one succeeds. */
  readonly lastFailure: CredentialFailure | null;
}

/** Throws GoogleTokenError; one immediate retry when a kept-alive connection was reset. */
export function serviceAccountCredential(serviceAccount: FcmServiceAccount, outbound: Outbound, tokenUrl = GOOGLE_TOKEN_URL): ServiceAccountCredential {
  let key: KeyObject;
  try {
    key = createPrivateKey(serviceAccount.private_key);
  } catch (error) {
    throw new Error(`FCM service account ${serviceAccount.client_email}: unreadable private_key (${(error as Error).message})`);
  }
  let lastFailure: CredentialFailure | null = null;

  const assertion = () => {
    const iat = Math.floor(Date.now() / 1000);
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode({ iss: serviceAccount.client_email, scope: FCM_SCOPES.join(' '), aud: tokenUrl, iat, exp: iat + 3600 })}`;
    return `${unsigned}.${sign('RSA-SHA256', Buffer.from(unsigned), key).toString('base64url')}`;
  };

  async function request(retried: boolean): Promise<GoogleOAuthAccessToken> {
    let answer: OutboundAnswer;
    let json: Record<string, unknown>;
    try {
      ({ answer, json } = await requestToken(
        outbound,
        tokenUrl,
        { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: assertion() },
        { timeoutMs: TOKEN_TIMEOUT_MS, maxBodyBytes: MAX_TOKEN_ANSWER_BYTES },
      ));
    } catch (error) {
      const code = (error instanceof OutboundError && error.code) || 'ENETWORK';
      if (RESET.has(code) && !retried) return request(true);
      const { message } = error as Error;
      throw new GoogleTokenError(`token request failed: ${message}`, { code, message });
    }
    if (answer.status === 200 && typeof json.access_token === 'string' && typeof json.expires_in === 'number') {
      return { access_token: json.access_token, expires_in: json.expires_in };
    }
    const said =
      typeof json.error === 'string'
        ? sanitizeReason(`${json.error}${typeof json.error_description === 'string' ? `: ${json.error_description}` : ''}`)
        : "an answer that is not Google's JSON error";
    const retryAfter = answer.headers['retry-after'];
    throw new GoogleTokenError(`token request answered ${answer.status}: ${said}`, {
      status: answer.status === 200 ? 502 : answer.status,
      retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
      message: said,
    });
  }

  return {
    get lastFailure() {
      return lastFailure;
    },
    async getAccessToken() {
      try {
        const token = await request(false);
        lastFailure = null;
        return token;
      } catch (error) {
        lastFailure = error instanceof GoogleTokenError ? error.failure : { message: String(error) };
        throw error;
      }
    },
  };
}
