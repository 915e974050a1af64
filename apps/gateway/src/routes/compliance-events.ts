import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  BadRequest,
  compileChecker,
  COMPLIANCE_EVENTS_MAX,
  ComplianceEventListSchema,
  ComplianceEventsAcceptedSchema,
  ComplianceEventSchema,
  ComplianceEventsSchema,
  Forbidden,
  TooLarge,
  Unauthorized,
  Unavailable,
  ValidationError,
  type ComplianceEvents,
} from '@operator/contract';
import { COMPLIANCE_CHANNEL } from '@operator/compliance';
import { UnavailableError } from '@operator/push';
import { publish, type RedisClient } from '@operator/queue';

const checkOne = compileChecker(ComplianceEventSchema);
const checkMany = compileChecker(ComplianceEventListSchema);

/** One body or an array, each checked by its own schema so the answer names the wrong field. */
function checkEvents(value: unknown) {
  if (Array.isArray(value) && value.length === 0) return { error: new ValidationError('request must hold at least one event') };
  const checked = Array.isArray(value) ? checkMany(value) : checkOne(value);
  return checked.ok ? { value: checked.value } : { error: new ValidationError(checked.error) };
}

/**
 * The CRM's USER_BLOCK_V2 and USER_CONSENTS_V2 events, forwarded by the operator: the players named
 * are announced on COMPLIANCE_CHANNEL and every push worker drops their cached compliance answers,
 * so their next pushes are checked against the operator's records afresh.
 */
export const complianceEventRoutes: FastifyPluginAsyncTypebox<{ redis: RedisClient }> = async (app, { redis }) => {
  app.post(
    '/v1/compliance/events',
    {
      schema: {
        tags: ['Back office: compliance'],
        summary: "A player's blocks or consents changed: push workers ask the operator's records again",
        description: `Takes one USER_BLOCK_V2 / USER_CONSENTS_V2 body ({user_id, timestamp, origin}) or an array of up to ${COMPLIANCE_EVENTS_MAX}. Their players' cached answers are dropped in every push worker at once.`,
        body: ComplianceEventsSchema,
        response: { 202: ComplianceEventsAcceptedSchema, 400: BadRequest, 401: Unauthorized, 403: Forbidden, 413: TooLarge, 503: Unavailable },
      },
      validatorCompiler: ({ httpPart }) => (httpPart === 'body' ? checkEvents : (value: unknown) => ({ value })),
    },
    async (request, reply) => {
      const events = request.body as ComplianceEvents;
      const userIds = [...new Set((Array.isArray(events) ? events : [events]).map((event) => event.user_id))];
      try {
        await publish(redis, COMPLIANCE_CHANNEL, JSON.stringify(userIds));
      } catch (error) {
        throw new UnavailableError('Redis is unavailable, retry later', { cause: error });
      }
      return reply.code(202).send({ players: userIds.length });
    },
  );
};
