import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { BadRequest, errorResponse, OPEN_ROUTE_BODY_LIMIT_BYTES, OpenRouteTooLarge } from '@operator/contract';
import type { VapidPublicKeys } from '@operator/config';

const TAGS = ['Devices: Web Push'];

const VapidPublicKeySchema = Type.Object(
  {
    public_key: Type.String({ description: 'The VAPID public key, base64url: PushManager.subscribe({applicationServerKey})' }),
    brand_id: Type.Union([Type.Integer(), Type.Null()], { description: 'The brand asked for; null when none was' }),
  },
  { additionalProperties: false },
);

/**
 * What a browser on the operator's site needs to subscribe, open to any origin and without a key:
 * public keys only. Cached by browsers and proxies for a few minutes.
 */
export const webPushRoutes: FastifyPluginAsyncTypebox<{ keys: VapidPublicKeys }> = async (app, { keys }) => {
  app.get(
    '/v1/push/web/vapid-public-key',
    {
      schema: {
        tags: TAGS,
        summary: "The VAPID public key a browser subscribes with: the brand's own, else the default brand's",
        querystring: Type.Object({ brand_id: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', description: 'The brand whose key to answer' })) }),
        response: {
          200: VapidPublicKeySchema,
          400: BadRequest,
          404: errorResponse('No VAPID public key is configured for this brand (VAPID_PUBLIC_KEY, VAPID_PUBLIC_KEYS)'),
          413: OpenRouteTooLarge,
        },
      },
      bodyLimit: OPEN_ROUTE_BODY_LIMIT_BYTES,
      onRequest: async (_request, reply) => {
        reply.header('access-control-allow-origin', '*');
      },
    },
    async (request, reply) => {
      const brand = request.query.brand_id;
      const key = (brand === undefined ? undefined : keys.brands.get(String(Number(brand)))) ?? keys.default;
      if (!key) return reply.code(404).send({ error: brand === undefined ? 'no VAPID public key is configured' : `no VAPID public key is configured for brand ${brand}` });
      reply.header('cache-control', 'public, max-age=300');
      return { public_key: key, brand_id: brand === undefined ? null : Number(brand) };
    },
  );
};
