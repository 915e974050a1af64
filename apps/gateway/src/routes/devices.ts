import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { v7 as uuidv7 } from 'uuid';
import { BadRequest, errorResponse, isUuid, TooLarge, Unauthorized, Unavailable, type DeviceView } from '@operator/contract';
import { checkDeviceCredential, DeviceSchema, RegisterDeviceSchema } from '@operator/provider-registry';
import { matchAllowedOrigin, brandRefusal, type AllowedOrigin } from '@operator/config';
import { deleteDevice, listPlayerDevices, registerDeviceOf, type Db, type Device, type Reads } from '@operator/db';
import { brandFilter } from '../brands';
import { orUnavailable } from './unavailable';

const TAGS = ['Back office: devices'];
const errors = { 401: Unauthorized, 503: Unavailable };
const BrandRefused = errorResponse("The key is bound to brands and brand_id is not one of them, or the token is another brand's device");

export function deviceView(device: Device): DeviceView {
  return {
    id: device.id,
    user_id: device.userId,
    brand_id: Number(device.brandId),
    provider: device.provider,
    platform: device.platform,
    token: device.token,
    active: device.active,
    deactivated_reason: device.deactivatedReason,
    created_at: device.createdAt.toISOString(),
    updated_at: device.updatedAt.toISOString(),
  };
}

/**
 * The device registry: the operator's own back end tells us which devices each player has. A Web
 * Push endpoint is where the worker will post from inside the network, so one outside
 * WEBPUSH_ALLOWED_ORIGINS is refused before anything is stored. A key bound to brands registers,
 * lists and deletes only devices of those brands.
 */
export const deviceRoutes: FastifyPluginAsyncTypebox<{ db: Db; reads: Reads; webpushAllowedOrigins: readonly AllowedOrigin[] }> = async (app, { db, reads, webpushAllowedOrigins }) => {
  app.post(
    '/v1/devices',
    {
      schema: {
        tags: TAGS,
        summary: "Register a player's device, or refresh it (201 when new)",
        body: RegisterDeviceSchema,
        response: { 200: DeviceSchema, 201: DeviceSchema, 400: BadRequest, 403: BrandRefused, 413: TooLarge, ...errors },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const problem = checkDeviceCredential(body);
      if (problem) return reply.code(400).send({ error: problem });
      if (body.subscription) {
        const match = matchAllowedOrigin(body.subscription.endpoint, webpushAllowedOrigins);
        if (!match.ok) return reply.code(400).send({ error: `subscription.endpoint: ${match.reason}` });
      }
      const refused = brandRefusal(request.brands, body.brand_id);
      if (refused) return reply.code(403).send({ error: refused });
      const registration = {
        brandId: BigInt(body.brand_id),
        userId: body.user_id,
        provider: body.provider,
        platform: body.platform ?? null,
        token: body.subscription?.endpoint ?? body.token!,
        p256dh: body.subscription?.keys.p256dh ?? null,
        auth: body.subscription?.keys.auth ?? null,
      };
      const registered = await orUnavailable(registerDeviceOf(db, uuidv7(), registration, brandFilter(request.brands)));
      if (!registered) return reply.code(403).send({ error: 'this token is a device of a brand this credential does not open' });
      return reply.code(registered.created ? 201 : 200).send(deviceView(registered.device));
    },
  );

  app.get(
    '/v1/players/:user_id/devices',
    {
      schema: {
        tags: TAGS,
        summary: "A player's devices (of the key's brands)",
        params: Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 255 }) }),
        querystring: Type.Object({ brand_id: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', errorMessage: 'must be a brand id (digits)' })) }),
        response: { 200: Type.Object({ devices: Type.Array(DeviceSchema) }), 400: BadRequest, ...errors },
      },
    },
    async (request) => {
      const brandId = request.query.brand_id === undefined ? undefined : BigInt(request.query.brand_id);
      const brands = brandFilter(request.brands);
      const devices = await orUnavailable(reads.run((db) => listPlayerDevices(db, request.params.user_id, brandId, brands)));
      return { devices: devices.map(deviceView) };
    },
  );

  app.delete(
    '/v1/devices/:id',
    {
      schema: {
        tags: TAGS,
        summary: 'Forget a device',
        params: Type.Object({ id: Type.String({ description: 'Device id' }) }),
        response: { 204: Type.Null({ description: 'Deleted' }), 404: errorResponse('No device has this id'), ...errors },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      // Another brand's device is answered as one that does not exist.
      if (!isUuid(id) || !(await orUnavailable(deleteDevice(db, id, brandFilter(request.brands))))) {
        return reply.code(404).send({ error: `no device ${id}` });
      }
      return reply.code(204).send(null);
    },
  );
};
