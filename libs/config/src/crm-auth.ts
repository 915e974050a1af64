import { Type, type Static } from '@sinclair/typebox';
import type { NodeEnv } from './base';
import { splitList } from './env';
import { boundEntry, type BrandSet } from './brands';
import { MIN_SECRET_LENGTH, ordinal, weakSecretProblems } from './secrets';

/** How the CRM may authenticate its calls to the gateway (push, polling, bonuses). */
export const CRM_AUTH_METHODS = ['api-key', 'basic', 'oauth2'] as const;
export type CrmAuthMethod = (typeof CRM_AUTH_METHODS)[number];

export const DEV_OAUTH_SIGNING_KEY = 'dev-oauth-signing-key-not-for-production';
/** HMAC-SHA256 keys shorter than this are refused in every environment: a token they sign could be forged anywhere. */
export const MIN_SIGNING_KEY_LENGTH = MIN_SECRET_LENGTH;

export const CrmAuthEnv = Type.Object({
  CRM_AUTH: Type.String({ default: 'api-key', description: `What the CRM's calls may authenticate with, comma-separated: ${CRM_AUTH_METHODS.join(', ')}` }),
  CRM_BASIC_USERS: Type.String({ default: '', description: 'Comma-separated user:password pairs the CRM may use with HTTP Basic (split at the first colon); user:password@7 opens brand 7 only' }),
  CRM_OAUTH_CLIENTS: Type.String({ default: '', description: 'Comma-separated client_id:client_secret pairs that may get a token at /oauth/token (split at the first colon); client:secret@7 opens brand 7 only' }),
  CRM_OAUTH_TOKEN_TTL: Type.Integer({ default: 7200, minimum: 60, maximum: 86400, description: 'Seconds an access token of /oauth/token is valid' }),
  CRM_OAUTH_SIGNING_KEYS: Type.String({
    default: DEV_OAUTH_SIGNING_KEY,
    description: `Comma-separated keys (${MIN_SIGNING_KEY_LENGTH}+ characters) of the access tokens' HMAC: the first signs, all verify`,
  }),
});
type CrmAuthRaw = Static<typeof CrmAuthEnv> & { NODE_ENV: NodeEnv };

export interface Credential {
  id: string;
  secret: string;
  /** What it opens: `id:secret@7+8` brands 7 and 8, `id:secret` every brand. */
  brands: BrandSet;
}

export interface CrmAuthSettings {
  methods: CrmAuthMethod[];
  basicUsers: Credential[];
  oauthClients: Credential[];
  tokenTtlSeconds: number;
  /** The first signs; every one verifies. */
  signingKeys: string[];
}

/** Split at the first colon: RFC 7617 forbids one in a Basic user name, a secret may hold one. */
function credentials(name: string, text: string, problems: string[]): Credential[] {
  return splitList(text).flatMap((entry, index) => {
    const bound = boundEntry(name, entry, index, problems);
    if (!bound) return [];
    const colon = bound.key.indexOf(':');
    if (colon < 1 || colon === bound.key.length - 1) {
      problems.push(`${name}: the ${ordinal(index)} entry is not id:secret with both parts non-empty`);
      return [];
    }
    return [{ id: bound.key.slice(0, colon), secret: bound.key.slice(colon + 1), brands: bound.brands }];
  });
}

export function crmAuthSettings(raw: CrmAuthRaw): { settings: CrmAuthSettings; problems: string[] } {
  const problems: string[] = [];
  const words = splitList(raw.CRM_AUTH);
  const unknown = words.filter((word) => !(CRM_AUTH_METHODS as readonly string[]).includes(word));
  if (unknown.length) problems.push(`CRM_AUTH has unknown ${unknown.map((word) => `"${word}"`).join(', ')}; valid: ${CRM_AUTH_METHODS.join(', ')}`);
  else if (!words.length) problems.push(`CRM_AUTH must name at least one of ${CRM_AUTH_METHODS.join(', ')}`);
  const methods = CRM_AUTH_METHODS.filter((method) => words.includes(method));

  const basicUsers = credentials('CRM_BASIC_USERS', raw.CRM_BASIC_USERS, problems);
  const oauthClients = credentials('CRM_OAUTH_CLIENTS', raw.CRM_OAUTH_CLIENTS, problems);
  // A token carries its client's brands, so one client id (its secrets rotating) has one set.
  const clientBrands = new Map(oauthClients.map((client) => [client.id, JSON.stringify(client.brands)]));
  for (const id of new Set(oauthClients.filter((client) => clientBrands.get(client.id) !== JSON.stringify(client.brands)).map((client) => client.id))) {
    problems.push(`CRM_OAUTH_CLIENTS names client ${id} with different brands; give each of its entries the same @brands`);
  }
  if (methods.includes('basic') && !basicUsers.length) problems.push('CRM_AUTH has basic, but CRM_BASIC_USERS names no user:password');
  if (methods.includes('oauth2') && !oauthClients.length) problems.push('CRM_AUTH has oauth2, but CRM_OAUTH_CLIENTS names no client_id:client_secret');

  const production = raw.NODE_ENV === 'production';
  const signingKeys = splitList(raw.CRM_OAUTH_SIGNING_KEYS);
  if (!signingKeys.length) problems.push('CRM_OAUTH_SIGNING_KEYS must name at least one key');
  if (production) problems.push(...weakSecretProblems('CRM_OAUTH_SIGNING_KEYS', signingKeys));
  else {
    signingKeys.forEach((key, index) => {
      if (key.length < MIN_SIGNING_KEY_LENGTH) problems.push(`CRM_OAUTH_SIGNING_KEYS: the ${ordinal(index)} key is shorter than ${MIN_SIGNING_KEY_LENGTH} characters`);
    });
  }
  // Refused outside development with oauth2: the key is published, so anyone could sign a token.
  if (raw.NODE_ENV !== 'development' && methods.includes('oauth2') && signingKeys.includes(DEV_OAUTH_SIGNING_KEY)) {
    problems.push(`CRM_OAUTH_SIGNING_KEYS holds the development key, which anyone can sign with; set keys of your own when CRM_AUTH has oauth2 and NODE_ENV is ${raw.NODE_ENV}`);
  }
  if (production) {
    problems.push(
      ...weakSecretProblems('CRM_BASIC_USERS', basicUsers.map((user) => user.secret), { what: 'password' }),
      ...weakSecretProblems('CRM_OAUTH_CLIENTS', oauthClients.map((client) => client.secret), { what: 'secret' }),
    );
  }
  return { settings: { methods, basicUsers, oauthClients, tokenTtlSeconds: raw.CRM_OAUTH_TOKEN_TTL, signingKeys }, problems };
}
