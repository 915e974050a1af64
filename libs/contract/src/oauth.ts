import { Type, type Static } from '@sinclair/typebox';

// The OAuth 2.0 token endpoint (RFC 6749, client credentials grant), as the CRM calls it: a POST
// with a JSON or form body, or a GET with the same fields as query parameters.

const TokenRequestFields = {
  grant_type: Type.Optional(Type.String({ description: 'Must be client_credentials' })),
  client_id: Type.Optional(Type.String({ description: 'A client of CRM_OAUTH_CLIENTS; or give it in an Authorization: Basic header (client_secret_basic)' })),
  client_secret: Type.Optional(Type.String({ description: "The client's secret" })),
  scope: Type.Optional(Type.String({ description: 'Ignored: a token opens every CRM endpoint' })),
};

export const TokenRequestSchema = Type.Object(TokenRequestFields, { $id: 'TokenRequest' });
export type TokenRequest = Static<typeof TokenRequestSchema>;

export const TokenQuerySchema = Type.Object(TokenRequestFields);

export const TokenResponseSchema = Type.Object(
  {
    access_token: Type.String({ description: 'Send it as Authorization: Bearer <access_token> to the CRM endpoints' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ description: 'Seconds the token is valid (CRM_OAUTH_TOKEN_TTL)' }),
  },
  { $id: 'TokenResponse', description: 'A new access token (Cache-Control: no-store)' },
);
export type TokenResponse = Static<typeof TokenResponseSchema>;

/** The error codes of RFC 6749, section 5.2, that this endpoint answers. */
export type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type';

/** RFC 6749's error code in `error`, in the gateway's one error shape (`code`, the HTTP status, added by its error hook). */
const oauthError = (description: string, extra: object = {}) =>
  Type.Unsafe<{ error: OAuthErrorCode; code?: number }>(
    Type.Object(
      { error: Type.String({ description: 'The OAuth error code (RFC 6749, 5.2)' }), code: Type.Integer({ description: 'The HTTP status of the answer' }) },
      { description, additionalProperties: false, ...extra },
    ),
  );

export const OAuthBadRequest = oauthError('invalid_request (a field missing, repeated or not text) or unsupported_grant_type (not client_credentials)');
export const OAuthUnauthorized = oauthError('invalid_client: no client credentials, or not those of a client of CRM_OAUTH_CLIENTS', {
  headers: { 'WWW-Authenticate': { type: 'string', description: 'Basic: the client may authenticate with HTTP Basic' } },
});
