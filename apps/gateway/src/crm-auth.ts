import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { commonBrands, type BoundKey, type Credential, type CrmAuthMethod, type CrmAuthSettings } from '@operator/config';
import { verifyAccessToken } from './access-token';
import { boundKeyMatcher } from './auth';
import type { SecurityScheme } from './docs';

const SCHEMES: Record<CrmAuthMethod, SecurityScheme> = { 'api-key': 'crmApiKey', basic: 'crmBasic', oauth2: 'crmOAuth' };
const PRESENTED_AS: Record<CrmAuthMethod, string> = { 'api-key': 'X-Api-Key', basic: 'Authorization: Basic', oauth2: 'Authorization: Bearer' };
const REALM = 'realm="crm"';

/** As boundKeyMatcher does; the pair is encoded unambiguously, so no split of one text matches another pair. */
export function credentialMatcher(credentials: Credential[]) {
  const brandsOf = boundKeyMatcher(credentials.map(({ id, secret, brands }) => ({ key: JSON.stringify([id, secret]), brands })));
  return (id: string, secret: string) => brandsOf(JSON.stringify([id, secret]));
}

export function authorizationOf(header: string | undefined): { scheme: string; value: string } | undefined {
  const match = header === undefined ? null : /^(\S+)\s+(\S+)\s*$/.exec(header);
  return match ? { scheme: match[1].toLowerCase(), value: match[2] } : undefined;
}

/** Split at the first colon (RFC 7617). */
export function basicCredentials(value: string): { id: string; secret: string } | undefined {
  const text = Buffer.from(value, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon === -1 ? undefined : { id: text.slice(0, colon), secret: text.slice(colon + 1) };
}

/** Admits what any method of `auth.methods` admits; a refusal says why, and which schemes are taken. */
export function crmAuthGuard(apiKeys: readonly BoundKey[], auth: CrmAuthSettings) {
  const enabled = new Set(auth.methods);
  const apiKeyBrands = boundKeyMatcher(apiKeys);
  const userBrands = credentialMatcher(auth.basicUsers);
  const clients = new Map(auth.oauthClients.map((client) => [client.id, client.brands]));
  const accepted = auth.methods.map((method) => PRESENTED_AS[method]);
  const takes = accepted.length === 1 ? accepted[0] : `${accepted.slice(0, -1).join(', ')} or ${accepted.at(-1)}`;

  return async (request: FastifyRequest, reply: FastifyReply) => {
    const refusals: string[] = [];
    let badToken = false;
    const apiKey = request.headers['x-api-key'];
    if (typeof apiKey === 'string' && apiKey !== '') {
      if (!enabled.has('api-key')) refusals.push('X-Api-Key is not accepted here');
      else {
        const brands = apiKeyBrands(apiKey);
        if (brands !== undefined) {
          request.brands = brands;
          return;
        }
        refusals.push('invalid API key');
      }
    }
    const authorization = authorizationOf(request.headers.authorization);
    if (authorization?.scheme === 'basic' && enabled.has('basic')) {
      const user = basicCredentials(authorization.value);
      const brands = user && userBrands(user.id, user.secret);
      if (brands !== undefined) {
        request.brands = brands;
        return;
      }
      refusals.push('invalid Basic credentials');
    } else if (authorization?.scheme === 'bearer' && enabled.has('oauth2')) {
      const check = verifyAccessToken(auth.signingKeys, authorization.value);
      // A client removed from CRM_OAUTH_CLIENTS loses its tokens at once, and one bound to fewer brands those brands.
      if (check.ok && clients.has(check.claims.sub)) {
        request.brands = commonBrands(check.claims.brands ?? null, clients.get(check.claims.sub)!);
        return;
      }
      badToken = true;
      refusals.push(!check.ok && check.error === 'expired' ? 'the bearer token has expired; get a new one at /oauth/token' : 'invalid bearer token');
    } else if (authorization) {
      refusals.push(`the Authorization scheme "${authorization.scheme}" is not accepted here`);
    }

    const challenges = [
      ...(enabled.has('basic') ? [`Basic ${REALM}, charset="UTF-8"`] : []),
      ...(enabled.has('oauth2') ? [`Bearer ${REALM}${badToken ? ', error="invalid_token"' : ''}`] : []),
    ];
    if (challenges.length) reply.header('www-authenticate', challenges.join(', '));
    const error = refusals.length ? `${refusals.join('; ')}; send ${takes}` : `missing credentials: send ${takes}`;
    return reply.code(401).send({ error });
  };
}

export function requireCrmAuth(scope: FastifyInstance, apiKeys: readonly BoundKey[], auth: CrmAuthSettings) {
  scope.addHook('onRequest', crmAuthGuard(apiKeys, auth));
  const security = auth.methods.map((method) => ({ [SCHEMES[method]]: [] }));
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, security };
  });
}
