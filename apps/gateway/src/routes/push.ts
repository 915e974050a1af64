import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  BadRequest,
  BatchResultSchema,
  checkPushRequest,
  checkStorable,
  crmHeadersSchema,
  dropNulls,
  errorResponse,
  PushAcceptedSchema,
  PushRequestSchema,
  readCrmHeaders,
  TooLarge,
  Unauthorized,
  Unavailable,
  type BatchResult,
  type CrmHeaderField,
  type PushRequest,
} from '@operator/contract';
import { brandRefusal } from '@operator/config';
import { acceptedMessages, NO_BRAND } from '@operator/metrics';
import { acceptMessages, groupSingles, UnavailableError, type AcceptDeps, type SingleGroupOptions } from '@operator/push';

export interface PushRouteOptions {
  accept: AcceptDeps;
  headerNames: Record<CrmHeaderField, string>;
  batchMaxMessages: number;
  /** Singles arriving together are stored in one transaction. */
  singleGroup: SingleGroupOptions;
}

const TAGS = ['CRM: push'];
const errors = { 400: BadRequest, 401: Unauthorized, 413: TooLarge, 503: Unavailable };
const BrandRefused = errorResponse("The credential is bound to brands and this push's activity.brand_id is not one of them");

/** An activity id the CRM gave a message, if it can be read even from an invalid one. */
function activityIdOf(item: unknown, field: 'id' | 'brand_id'): number | null {
  const id = (item as { activity?: Record<string, unknown> } | null)?.activity?.[field];
  return typeof id === 'number' && Number.isSafeInteger(id) ? id : null;
}
const crmIdOf = (item: unknown) => activityIdOf(item, 'id');
const brandIdOf = (item: unknown) => activityIdOf(item, 'brand_id') ?? undefined;

export const pushRoutes: FastifyPluginAsyncTypebox<PushRouteOptions> = async (app, options) => {
  const { accept, headerNames, batchMaxMessages } = options;
  const brandLabel = accept.brandLabel ?? (() => NO_BRAND);
  const singles = groupSingles(accept, options.singleGroup);
  app.addHook('onClose', () => singles.close());

  const crmHeaders = crmHeadersSchema(headerNames);

  app.post(
    '/channels/push/single',
    {
      schema: {
        tags: TAGS,
        summary: 'Accept one push (contract 4.1, 7.1)',
        headers: crmHeaders,
        body: PushRequestSchema,
        response: { 200: PushAcceptedSchema, ...errors, 403: BrandRefused, 404: errorResponse('The player has no active device for the brand') },
      },
      preValidation: async (request) => {
        request.body = dropNulls(request.body) as PushRequest;
      },
      config: { keepsField: 'meta' },
    },
    async (request, reply) => {
      const problem = checkStorable(request.body);
      if (problem) return reply.code(400).send({ error: problem });
      const refused = brandRefusal(request.brands, request.body.activity.brand_id);
      if (refused) {
        acceptedMessages('single', 'invalid', 1, brandLabel(request.body.activity.brand_id));
        return reply.code(403).send({ error: refused });
      }
      const headers = readCrmHeaders(request.headers, headerNames);
      if (!headers.ok) return reply.code(400).send({ error: headers.error });
      const rawMeta = request.body.meta === undefined ? undefined : (request.rawField as string | undefined);
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

  app.post(
    '/channels/push/batch',
    {
      schema: {
        tags: TAGS,
        summary: 'Accept many pushes (contract 4.2, 7.2)',
        description:
          "Each message is answered in successful, failed (refused for good, as one for a brand the credential does not open) or fatal (retry it); messages past BATCH_MAX_MESSAGES are left out, so the CRM sends them again.",
        headers: crmHeaders,
        body: Type.Array(Type.Unknown({ description: 'A push request (PushRequest, as for /channels/push/single); an invalid one is answered in failed' }), {
          description: 'Push requests (contract 2.1)',
        }),
        response: { 200: BatchResultSchema, ...errors },
      },
      // A message that cannot be read as one (a key given twice, nested too deep) is refused alone.
      config: { answersEachItem: true, keepsField: 'meta' },
    },
    async (request, reply) => {
      // The headers are the whole batch's: one that cannot be stored refuses the batch.
      // Messages past the limit are left out of the answer, so the CRM sends them again (7.2).
      const items = request.body.slice(0, batchMaxMessages);
      const headers = readCrmHeaders(request.headers, headerNames);
      if (!headers.ok) {
        for (const item of items) acceptedMessages('batch', 'invalid', 1, brandLabel(brandIdOf(item)));
        return reply.code(400).send({ error: headers.error });
      }
      const result: BatchResult = { successful: [], failed: [], fatal: [] };
      const valid: { index: number; message: PushRequest }[] = [];
      items.forEach((item, index) => {
        const problem = request.itemProblems?.get(index);
        const checked = problem === undefined ? checkPushRequest(item) : { ok: false as const, error: problem };
        const refused = checked.ok ? brandRefusal(request.brands, checked.value.activity.brand_id) : undefined;
        if (checked.ok && !refused) valid.push({ index, message: checked.value });
        else {
          result.failed.push({ id: crmIdOf(item), error: `message ${index}: ${checked.ok ? refused : checked.error}` });
          acceptedMessages('batch', 'invalid', 1, brandLabel(brandIdOf(item)));
        }
      });

      const rawMetas = (request.rawField as (string | undefined)[] | undefined) ?? [];
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
};
