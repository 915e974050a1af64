import swagger, { type StaticDocumentSpec } from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import pkg from '../../../package.json';

/** How each kind of caller authenticates; which routes take which is set where each guard is added. */
export const SECURITY_SCHEMES = {
  crmApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: "The CRM's key: one of OPERATOR_API_KEYS" },
  crmBasic: { type: 'http', scheme: 'basic', description: 'The CRM as a user:password of CRM_BASIC_USERS' },
  crmOAuth: {
    type: 'oauth2',
    description: 'A bearer token the CRM gets at /oauth/token as a client of CRM_OAUTH_CLIENTS',
    flows: { clientCredentials: { tokenUrl: '/oauth/token', scopes: {} } },
  },
  internalDeviceKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Api-Key',
    description: "The operator back end's device key: one of INTERNAL_DEVICE_KEYS, which open the device routes and nothing else",
  },
  internalAdminKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Api-Key',
    description: "The operator back end's admin key: one of INTERNAL_ADMIN_KEYS or INTERNAL_API_KEYS, which open every internal route",
  },
} as const;
export type SecurityScheme = keyof typeof SECURITY_SCHEMES;

const TAGS = [
  { name: 'CRM: push', description: 'Pushes from the CRM (contract 4.1, 4.2), with the `X-<Word>-*` headers of contract 5.2' },
  { name: 'CRM: push status', description: 'Polling the state of pushes (contract 6), for a CRM that takes no webhooks' },
  { name: 'CRM: authentication', description: 'The OAuth 2.0 token endpoint (client credentials), when CRM_AUTH has oauth2' },
  { name: 'CRM: bonuses', description: 'The bonus list and credits (contract 4.3-4.5); a credit is exactly once per `X-<Word>-Id`' },
  { name: 'Back office: devices', description: "The operator's back end registers its players' devices" },
  { name: 'Back office: bonuses', description: 'The bonus catalog, wallets, player bonuses and credits' },
  { name: 'Back office: webhooks', description: 'Events the CRM did not take' },
  { name: 'Devices: engagement', description: "Reports from the player's device, with the push's tracking token instead of a key" },
  { name: 'Health', description: 'Probes for the orchestrator' },
];

const NOT_API = /^\/(docs|openapi\.json|admin|metrics)(\/|$)/;

export const OPENAPI_PATH = '/openapi.json';

/** Register it before the routes: the document collects each route as it is added. */
export function registerApiDocument(app: FastifyInstance) {
  app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: pkg.name, description: pkg.description, version: pkg.version },
      tags: TAGS,
      components: { securitySchemes: SECURITY_SCHEMES },
    },
    // Components are named after the schemas' $id (PushRequest, Device, ...).
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url }) => ({ schema: NOT_API.test(url) ? { ...schema, hide: true } : schema, url }),
  });
}

/** /openapi.json and /docs of `api`, on `api` itself or on the operations port (a copy made once `api` is ready). */
export function apiDocsPages(api: FastifyInstance): FastifyPluginAsync {
  return async (app) => {
    if (!app.hasDecorator('swagger')) {
      await api.ready();
      // Typed for OpenAPI 2 and 3.0; the document is 3.1, which the static mode serves all the same.
      await app.register(swagger, { mode: 'static', specification: { document: api.swagger() as StaticDocumentSpec['document'] } });
    }
    await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true, uiConfig: { docExpansion: 'list', deepLinking: true } });
    app.get(OPENAPI_PATH, async () => app.swagger());
  };
}
