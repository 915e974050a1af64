import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  BatchResultSchema,
  checkPushRequest,
  checkStorable,
  dropNulls,
  ErrorSchema,
  PushAcceptedSchema,
  PushRequestSchema,
  rawField,
  readCrmHeaders,
  type BatchResult,
  type CrmHeaderField,
  type PushRequest,
} from '@operator/contract';
import { acceptMessages, groupSingles, UnavailableError, type AcceptDeps, type SingleGroupOptions } from '@operator/push';

export interface PushRouteOptions {
  accept: AcceptDeps;
  headerNames: Record<CrmHeaderField, string>;
  batchMaxMessages: number;
  /** Singles arriving together are stored in one transaction. */
  singleGroup: SingleGroupOptions;
}

const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema, 413: ErrorSchema, 503: ErrorSchema };

/** The id the CRM gave a message, if it can be read even from an invalid one. */
function crmIdOf(item: unknown): number | null {
  const id = (item as { activity?: { id?: unknown } } | null)?.activity?.id;
  return typeof id === 'number' && Number.isSafeInteger(id) ? id : null;
}

export async function pushRoutes(app: FastifyInstance, options: PushRouteOptions) {
  const { accept, headerNames, batchMaxMessages } = options;
  const singles = groupSingles(accept, options.singleGroup);
  app.addHook('onClose', () => singles.close());

  app.post<{ Body: PushRequest }>(
    '/channels/push/single',
    {
      schema: { body: PushRequestSchema, response: { 200: PushAcceptedSchema, ...errors } },
      preValidation: async (request) => {
        request.body = dropNulls(request.body) as PushRequest;
      },
    },
    async (request, reply) => {
      const problem = checkStorable(request.body);
      if (problem) return reply.code(400).send({ error: problem });
      const headers = readCrmHeaders(request.headers, headerNames);
      if (!headers.ok) return reply.code(400).send({ error: headers.error });
      // Only a meta that is there has raw text worth finding.
      const rawMeta =
        request.body.meta === undefined || request.rawBody === undefined ? undefined : (rawField(request.rawBody, 'meta') as string | undefined);
      const outcome = await singles.accept(request.body, headers.value, rawMeta);
      switch (outcome.kind) {
        case 'accepted':
          return reply.code(200).send({ push_id: outcome.pushId });
        case 'unreachable':
          return reply.code(404).send({ error: outcome.error });
        case 'fatal':
          // Answered by the error handler, like every 503: the CRM retries this message.
          throw new UnavailableError(outcome.error);
      }
    },
  );

  app.post<{ Body: unknown[] }>(
    '/channels/push/batch',
    {
      schema: {
        body: Type.Array(Type.Unknown(), { description: 'Push requests (contract 2.1)' }),
        response: { 200: BatchResultSchema, ...errors },
      },
    },
    async (request, reply) => {
      // The headers are the whole batch's: one that cannot be stored refuses the batch.
      const headers = readCrmHeaders(request.headers, headerNames);
      if (!headers.ok) return reply.code(400).send({ error: headers.error });
      // Messages past the limit are left out of the answer, so the CRM sends them again (7.2).
      const items = request.body.slice(0, batchMaxMessages);
      const result: BatchResult = { successful: [], failed: [], fatal: [] };
      const valid: { index: number; message: PushRequest }[] = [];
      items.forEach((item, index) => {
        const checked = checkPushRequest(item);
        if (checked.ok) valid.push({ index, message: checked.value });
        else result.failed.push({ id: crmIdOf(item), error: `message ${index}: ${checked.error}` });
      });

      const rawMetas = request.rawBody === undefined ? [] : (rawField(request.rawBody, 'meta') as (string | undefined)[]);
      const outcomes = await acceptMessages(
        accept,
        valid.map((entry) => entry.message),
        headers.value,
        valid.map((entry) => rawMetas[entry.index]),
      );
      outcomes.forEach((outcome, i) => {
        const id = valid[i].message.activity.id;
        if (outcome.kind === 'accepted') result.successful.push({ id, push_id: outcome.pushId });
        else if (outcome.kind === 'unreachable') result.failed.push({ id, error: outcome.error });
        else result.fatal.push({ id, error: outcome.error });
      });
      return reply.code(200).send(result);
    },
  );
}
