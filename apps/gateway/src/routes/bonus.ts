import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import {
  BadRequest,
  BonusListSchema,
  checkStorable,
  CreditAcceptedSchema,
  CreditBonusRequestSchema,
  CreditFundsRequestSchema,
  crmHeadersSchema,
  errorResponse,
  readCrmHeaders,
  TooLarge,
  Unauthorized,
  Unavailable,
  type CreditAccepted,
  type CrmHeaderField,
  type CrmHeaders,
} from '@operator/contract';
import { bonusBrand, prepareBonusCredit, prepareFundsCredit, type Prepared } from '@operator/bonus';
import { getBonus, listBonuses, recordCredit, type Db, type Reads } from '@operator/db';
import { orUnavailable } from './unavailable';

export interface BonusRouteOptions {
  db: Db;
  /** The CRM's dropdown reads the catalog there; a credit reads its bonus on the primary (`db`). */
  reads: Reads;
  headerNames: Record<CrmHeaderField, string>;
  /** BONUS_DEFAULT_BRAND: the brand of a request whose credential opens several brands or all. */
  defaultBrand: number;
}

type CreditInput = Parameters<typeof prepareFundsCredit>[0];
type Refusal = { status: 400 | 403 | 404 | 409 | 422; error: string };

const BrandForbidden = errorResponse('The credential opens several brands (or every brand) but not BONUS_DEFAULT_BRAND, the brand such a request is for');

const refused = (answer: CreditAccepted | Refusal): answer is Refusal => 'error' in answer;

/** A credit is answered 200 once recorded; the bonus app carries it out, exactly once per X-<Word>-Id. */
export const bonusRoutes: FastifyPluginAsyncTypebox<BonusRouteOptions> = async (app, { db, reads, headerNames, defaultBrand }) => {
  // The CRM fills a dropdown from this; it reads Success/Errors, so even a failure answers 200.
  app.get(
    '/bonus/list',
    {
      schema: {
        tags: ['CRM: bonuses'],
        summary: 'The active catalog bonuses, for the CRM dropdown (contract 4.4)',
        response: { 200: BonusListSchema, 401: Unauthorized, 403: BrandForbidden, 503: Unavailable },
      },
    },
    async (request, reply) => {
      const brand = bonusBrand(request.brands, defaultBrand);
      if (!brand.ok) return reply.code(403).send({ error: brand.error });
      try {
        // The entries for every brand and the brand's own.
        const bonuses = await reads.run((replica) => listBonuses(replica.pool, true, [brand.brandId]));
        return { Data: bonuses.map((bonus) => ({ text: bonus.label, value: bonus.code })), Success: true, Errors: [] };
      } catch (error) {
        request.log.error({ err: error }, 'bonus list failed');
        return { Data: [], Success: false, Errors: ['the bonus list is unavailable right now, retry later'] };
      }
    },
  );

  /**
   * A repeat gets the first answer. Another request under a used key or tuple is a 409: the CRM
   * would otherwise take the first credit's answer for a credit never made.
   */
  async function record(request: FastifyRequest, body: Record<string, unknown>, prepare: (input: CreditInput) => Promise<Prepared>): Promise<CreditAccepted | Refusal> {
    const brand = bonusBrand(request.brands, defaultBrand);
    if (!brand.ok) return { status: 403, error: brand.error };
    // The body is kept as sent, extra fields included: all of it must be storable.
    const problem = checkStorable(body);
    if (problem) return { status: 400, error: problem };
    const checkedHeaders = readCrmHeaders(request.headers, headerNames);
    if (!checkedHeaders.ok) return { status: 400, error: checkedHeaders.error };
    const headers: CrmHeaders = checkedHeaders.value;
    if (!headers.id) return { status: 400, error: `missing ${headerNames.id} header (the idempotency key)` };
    // The amount as written (keepsField), read by the body check's own pass.
    const rawAmount = request.rawField as string | undefined;
    const prepared = await prepare({ body, text: request.rawBody ?? JSON.stringify(body), rawAmount, headers, idempotencyKey: headers.id, brandId: brand.brandId });
    if (!prepared.ok) return { status: prepared.status, error: prepared.error };
    const recorded = await orUnavailable(recordCredit(db.pool, prepared.credit));
    if (recorded.replay && recorded.conflict === 'key') {
      return { status: 409, error: `${headerNames.id} ${headers.id} was used for another request (credit ${recorded.credit.id}); a retry must repeat the same request` };
    }
    if (recorded.replay && recorded.conflict === 'tuple') {
      return {
        status: 409,
        error: `credit ${recorded.credit.id} has the same ${headerNames.activity_id}, ${headerNames.action_id}, ${headerNames.trigger_hash} and user_id but another request`,
      };
    }
    return { credit_id: recorded.credit.id, status: 'accepted' };
  }

  const creditSchema = {
    tags: ['CRM: bonuses'],
    headers: crmHeadersSchema(headerNames, ['id']),
  };
  const creditErrors = {
    400: BadRequest,
    401: Unauthorized,
    403: BrandForbidden,
    409: errorResponse('The idempotency key, or the activity, action, player and trigger hash, was used for another request; nothing was credited'),
    413: TooLarge,
    503: Unavailable,
  };

  app.post(
    '/bonus/credit',
    {
      schema: {
        ...creditSchema,
        summary: 'Credit a catalog bonus to a player (contract 4.3)',
        body: CreditBonusRequestSchema,
        response: {
          200: CreditAcceptedSchema,
          ...creditErrors,
          404: errorResponse("No catalog bonus of the request's brand (or of every brand) has this code"),
          422: errorResponse('The catalog bonus is not active, or is over what one credit may carry'),
        },
      },
      config: { keepsField: 'amount' },
    },
    async (request, reply) => {
      const answer = await record(request, request.body, async (input) => prepareBonusCredit(input, await orUnavailable(getBonus(db.pool, request.body.bonus_code, [input.brandId]))));
      return refused(answer) ? reply.code(answer.status).send({ error: answer.error }) : answer;
    },
  );

  app.post(
    '/bonus/credit/funds',
    {
      schema: {
        ...creditSchema,
        summary: "Credit money straight to a player's wallet (contract 4.5)",
        body: CreditFundsRequestSchema,
        response: { 200: CreditAcceptedSchema, ...creditErrors },
      },
      config: { keepsField: 'amount' },
    },
    async (request, reply) => {
      const answer = await record(request, request.body, async (input) => prepareFundsCredit(input));
      return refused(answer) ? reply.code(answer.status).send({ error: answer.error }) : answer;
    },
  );
};
