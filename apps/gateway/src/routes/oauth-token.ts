import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CrmAuthSettings } from '@operator/config';
import {
  errorResponse,
  OAuthBadRequest,
  OAuthUnauthorized,
  OPEN_ROUTE_BODY_LIMIT_BYTES,
  OpenRouteTooLarge,
  TokenQuerySchema,
  TokenRequestSchema,
  TokenResponseSchema,
  type OAuthErrorCode,
  type TokenRequest,
} from '@operator/contract';
import { issueAccessToken } from '../access-token';
import { authorizationOf, basicCredentials, credentialMatcher } from '../crm-auth';

const TAGS = ['CRM: authentication'];
export const TOKEN_PATH = '/oauth/token';

/** A repeated field becomes an array, which the schema refuses (RFC 6749, 3.2). */
function formFields(body: string): Record<string, string | string[]> {
  const fields: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(body)) {
    const seen = fields[name];
    fields[name] = seen === undefined ? value : [seen, value].flat();
  }
  return fields;
}

/** A Basic user name or password as RFC 6749 (2.3.1) has clients write it: form-encoded. */
export function formDecoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

export interface OAuthTokenOptions {
  auth: CrmAuthSettings;
  allowGet: boolean;
}

/** The client credentials grant (RFC 6749, 4.4), for the CRM's routes. */
export const oauthTokenRoutes: FastifyPluginAsyncTypebox<OAuthTokenOptions> = async (app, { auth, allowGet }) => {
  const clientBrands = credentialMatcher(auth.oauthClients);
  const isClient = (id: string, secret: string) => clientBrands(id, secret) !== undefined;
  /** Basic credentials, written as they are or form-encoded. */
  const basicClient = ({ id, secret }: { id: string; secret: string }) => {
    if (isClient(id, secret)) return id;
    const decodedId = formDecoded(id);
    const decodedSecret = formDecoded(secret);
    return decodedId !== undefined && decodedSecret !== undefined && isClient(decodedId, decodedSecret) ? decodedId : undefined;
  };

  // Every entry of one client id has the same brands (checked at boot).
  const brandsOfClient = (id: string) => auth.oauthClients.find((entry) => entry.id === id)!.brands;

  // Here only: every other route reads its body as JSON.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, formFields(body as string));
  });

  // The body carries RFC 6749's code alone (the gateway's error shape has no room for more); why is
  // logged, for the operator who looks into a client that cannot get a token.
  const refuse = (reply: FastifyReply, status: 400 | 401, error: OAuthErrorCode, description: string) => {
    if (status === 401) reply.header('www-authenticate', 'Basic realm="oauth", charset="UTF-8"');
    reply.log.info({ error, reason: description }, 'token request refused');
    return reply.code(status).send({ error });
  };

  async function token(request: FastifyRequest, fields: TokenRequest, reply: FastifyReply) {
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    if (request.validationError) return refuse(reply, 400, 'invalid_request', request.validationError.message);
    if (fields.grant_type === undefined) return refuse(reply, 400, 'invalid_request', 'grant_type is required');
    if (fields.grant_type !== 'client_credentials') {
      return refuse(reply, 400, 'unsupported_grant_type', `grant_type ${JSON.stringify(fields.grant_type)} is not supported; use client_credentials`);
    }
    const authorization = authorizationOf(request.headers.authorization);
    let client: string | undefined;
    if (authorization?.scheme === 'basic') {
      const basic = basicCredentials(authorization.value);
      if (fields.client_secret !== undefined || (fields.client_id !== undefined && fields.client_id !== basic?.id)) {
        return refuse(reply, 400, 'invalid_request', 'give the client credentials once: in the Authorization header or in the request, not both');
      }
      client = basic && basicClient(basic);
    } else if (fields.client_id !== undefined && fields.client_secret !== undefined) {
      if (isClient(fields.client_id, fields.client_secret)) client = fields.client_id;
    } else {
      return refuse(reply, 401, 'invalid_client', 'client_id and client_secret are required (or HTTP Basic with them)');
    }
    if (client === undefined) return refuse(reply, 401, 'invalid_client', 'unknown client or wrong secret');
    return {
      access_token: issueAccessToken(auth.signingKeys[0], client, auth.tokenTtlSeconds, undefined, brandsOfClient(client)),
      token_type: 'Bearer' as const,
      expires_in: auth.tokenTtlSeconds,
    };
  }

  const responses = { 200: TokenResponseSchema, 400: OAuthBadRequest, 401: OAuthUnauthorized };

  app.post(
    TOKEN_PATH,
    {
      schema: {
        tags: TAGS,
        summary: 'Get an access token (client credentials grant)',
        description: 'The body is JSON or application/x-www-form-urlencoded.',
        consumes: ['application/json', 'application/x-www-form-urlencoded'],
        body: TokenRequestSchema,
        response: { ...responses, 413: OpenRouteTooLarge },
      },
      // Anyone may call it: a body of more than a few fields is refused before it is read further.
      bodyLimit: OPEN_ROUTE_BODY_LIMIT_BYTES,
      attachValidation: true,
    },
    (request, reply) => token(request, request.body ?? {}, reply),
  );

  // RFC 6749 (2.3.1) keeps the secret out of URLs, which proxies and access logs keep; some CRMs
  // still send it so, and only an operator who accepts that turns it on.
  app.get(
    TOKEN_PATH,
    {
      schema: {
        tags: TAGS,
        summary: 'Get an access token, the fields as query parameters (only with CRM_OAUTH_ALLOW_GET=true)',
        querystring: TokenQuerySchema,
        response: { ...responses, 405: errorResponse('GET is turned off (CRM_OAUTH_ALLOW_GET): POST the fields instead', { headers: { Allow: { type: 'string' } } }) },
      },
      attachValidation: true,
    },
    async (request, reply) => {
      if (!allowGet) {
        return reply
          .code(405)
          .header('allow', 'POST')
          .send({ error: 'GET /oauth/token is turned off: a client secret in the URL is kept by proxies and access logs; POST the fields as a form or JSON body' });
      }
      return token(request, request.query, reply);
    },
  );
};
