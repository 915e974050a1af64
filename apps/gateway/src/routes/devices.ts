import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { v7 as uuidv7 } from 'uuid';
import { BadRequest, errorResponse, isUuid, TooLarge, Unauthorized, Unavailable, type DeviceView } from '@operator/contract';
import { checkDeviceCredential, DeviceSchema, RegisterDeviceSchema } from '@operator/provider-registry';
import { matchAllowedOrigin, type AllowedOrigin } from '@operator/config';
import { deleteDevice, listPlayerDevices, registerDevice, type Db, type Device, type Reads } from '@operator/db';
import { orUnavailable } from './unavailable';

const TAGS = ['Back office: devices'];
const errors = { 401: Unauthorized, 503: Unavailable };

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
 * WEBPUSH_ALLOWED_ORIGINS is refused before anything is stored.
 */
export const deviceRoutes: FastifyPluginAsyncTypebox<{ db: Db; reads: Reads; webpushAllowedOrigins: readonly AllowedOrigin[] }> = async (app, { db, reads, webpushAllowedOrigins }) => {
  app.post(
    '/v1/devices',
    {
      schema: {
        tags: TAGS,
        summary: "Register a player's device, or refresh it (201 when new)",
        body: RegisterDeviceSchema,
        response: { 200: DeviceSchema, 201: DeviceSchema, 400: BadRequest, 413: TooLarge, ...errors },
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
      const { device, created } = await orUnavailable(
        registerDevice(db, uuidv7(), {
          brandId: BigInt(body.brand_id),
          userId: body.user_id,
          provider: body.provider,
          platform: body.platform ?? null,
          token: body.subscription?.endpoint ?? body.token!,
          p256dh: body.subscription?.keys.p256dh ?? null,
          auth: body.subscription?.keys.auth ?? null,
        }),
      );
      return reply.code(created ? 201 : 200).send(deviceView(device));
    },
  );

  app.get(
    '/v1/players/:user_id/devices',
    {
      schema: {
        tags: TAGS,
        summary: "A player's devices",
        params: Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 255 }) }),
        querystring: Type.Object({ brand_id: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', errorMessage: 'must be a brand id (digits)' })) }),
        response: { 200: Type.Object({ devices: Type.Array(DeviceSchema) }), 400: BadRequest, ...errors },
      },
    },
    async (request) => {
      const brandId = request.query.brand_id === undefined ? undefined : BigInt(request.query.brand_id);
      const devices = await orUnavailable(reads.run((db) => listPlayerDevices(db, request.params.user_id, brandId)));
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
      if (!isUuid(id) || !(await orUnavailable(deleteDevice(db, id)))) {
        return reply.code(404).send({ error: `no device ${id}` });
      }
      return reply.code(204).send(null);
    },
  );
};
