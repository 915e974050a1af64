import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';

// Google's OAuth2 JWT-bearer grant as the fake FCM checks it: what a `cert()` credential sends to
// oauth2.googleapis.com, its RS256 signature checked with the service account's public key and its
// claims (iss, aud, iat/exp, scope) as Google checks them.

export const GOOGLE_TOKEN_AUDIENCE = 'https://oauth2.googleapis.com/token';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ACCEPTED_SCOPES = ['https://www.googleapis.com/auth/firebase.messaging', 'https://www.googleapis.com/auth/cloud-platform'];

/** A service account key file as Google issues it (the fields firebase-admin's `cert()` reads). */
export interface FakeServiceAccount {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  token_uri: string;
}

/** A new service account of `projectId`, and the public key its grants are verified with. */
export function newServiceAccount(projectId: string): { serviceAccount: FakeServiceAccount; publicKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const serviceAccount: FakeServiceAccount = {
    type: 'service_account',
    project_id: projectId,
    private_key_id: randomBytes(20).toString('hex'),
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    client_email: `firebase-adminsdk-test@${projectId}.iam.gserviceaccount.com`,
    client_id: String(BigInt(`0x${randomBytes(8).toString('hex')}`)),
    token_uri: GOOGLE_TOKEN_AUDIENCE,
  };
  return { serviceAccount, publicKey };
}

/** Why Google refuses a grant (400, in OAuth2's error shape), with its claims when they could be read. */
export interface GrantRefusal {
  error: string;
  description: string;
  claims: Record<string, unknown> | null;
}

function base64urlJson(part: string): Record<string, unknown> {
  const value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('not an object');
  return value;
}

/** The verified claims of a grant's form body for `account`, or why it is refused. */
export function readGrant(body: string, account: { publicKey: KeyObject; clientEmail: string }): { claims: Record<string, unknown> } | { refusal: GrantRefusal } {
  const refuse = (error: string, description: string, claims: Record<string, unknown> | null = null) => ({ refusal: { error, description, claims } });
  const form = new URLSearchParams(body);
  if (form.get('grant_type') !== JWT_BEARER) return refuse('unsupported_grant_type', 'Invalid grant_type: ' + form.get('grant_type'));
  const parts = (form.get('assertion') ?? '').split('.');
  if (parts.length !== 3) return refuse('invalid_grant', 'Invalid JWT: not a JWT');
  let header: Record<string, unknown>;
  let claims: Record<string, unknown>;
  try {
    header = base64urlJson(parts[0]);
    claims = base64urlJson(parts[1]);
  } catch {
    return refuse('invalid_grant', 'Invalid JWT: unreadable header or claims');
  }
  if (header.alg !== 'RS256') return refuse('invalid_grant', `Invalid JWT: alg ${String(header.alg)} is not RS256`, claims);
  const signed = verify('RSA-SHA256', Buffer.from(`${parts[0]}.${parts[1]}`), account.publicKey, Buffer.from(parts[2], 'base64url'));
  if (!signed) return refuse('invalid_grant', 'Invalid JWT Signature.', claims);
  if (claims.iss !== account.clientEmail) return refuse('invalid_grant', 'Invalid grant: account not found', claims);
  if (claims.aud !== GOOGLE_TOKEN_AUDIENCE) return refuse('invalid_grant', 'Invalid JWT: Failed audience check.', claims);
  const now = Math.floor(Date.now() / 1000);
  const iat = Number(claims.iat);
  const exp = Number(claims.exp);
  if (!Number.isFinite(iat) || !Number.isFinite(exp) || iat > now + 300 || exp <= now || exp - iat > 3600) {
    const text = 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.';
    return refuse('invalid_grant', text, claims);
  }
  const scopes = String(claims.scope ?? '').split(/\s+/);
  if (!scopes.some((scope) => ACCEPTED_SCOPES.includes(scope))) return refuse('invalid_scope', 'Invalid OAuth scope or ID token audience provided.', claims);
  return { claims };
}
