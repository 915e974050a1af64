import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  BadRequest,
  BonusCodeParamsSchema,
  BonusStatusChangedSchema,
  BonusStatusRequestSchema,
  CatalogBonusRequestSchema,
  CatalogBonusSavedSchema,
  CatalogBonusSchema,
  checkStorable,
  CreditQuerySchema,
  CreditSchema,
  errorResponse,
  Forbidden,
  isUuid,
  LedgerSchema,
  LimitQuerySchema,
  PlayerBonusSchema,
  PlayerBonusStatusParamsSchema,
  TooLarge,
  Unauthorized,
  Unavailable,
  WalletSchema,
  type CreditView,
} from '@operator/contract';
import { changeBonusStatus, creditFields, formatMinor, isCurrency, parseAmount, type BonusDeps } from '@operator/bonus';
import { getCredit, listBonuses, listCredits, listPlayerBonuses, playerAccounts, playerEntries, upsertBonus, readOrPrimary, type CreditRow, type Db, type Reads } from '@operator/db';
import { brandRefusal } from '@operator/config';
import { orUnavailable } from './unavailable';
import { brandFilter } from '../brands';

const TAGS = ['Back office: bonuses'];
const PlayerParams = Type.Object({ user_id: Type.String({ description: 'Player id' }) });
const errors = { 401: Unauthorized, 403: Forbidden, 503: Unavailable };

function creditView(credit: CreditRow): CreditView {
  return {
    ...creditFields(credit),
    status: credit.status,
    error: credit.error,
    reference: credit.reference,
    attempts: credit.attempts,
    request: credit.request,
    headers: credit.crmHeaders,
    created_at: credit.createdAt.toISOString(),
    updated_at: credit.updatedAt.toISOString(),
  };
}

/**
 * The operator's own back office: the bonus catalog, players' wallets and bonuses, credits. A key
 * bound to brands sees and acts on those brands only (and on the catalog entries for every brand).
 */
export const bonusAdminRoutes: FastifyPluginAsyncTypebox<{ db: Db; reads: Reads; bonus: BonusDeps }> = async (app, { db, reads, bonus }) => {
  app.get(
    '/v1/bonuses',
    { schema: { tags: TAGS, summary: 'The bonus catalog, inactive bonuses included', response: { 200: Type.Object({ bonuses: Type.Array(CatalogBonusSchema) }), ...errors } } },
    async (request) => ({
      bonuses: (await orUnavailable(reads.run((replica) => listBonuses(replica.pool, false, brandFilter(request.brands))))).map((b) => ({
        code: b.code,
        brand_id: b.brandId === null ? null : Number(b.brandId),
        label: b.label,
        type: b.type,
        product: b.product,
        amount: formatMinor(b.amountMinor, b.currency),
        currency: b.currency,
        validity_days: b.validityDays,
        wagering_requirement: Number(b.wageringRequirement),
        active: b.active,
      })),
    }),
  );

  app.put(
    '/v1/bonuses/:code',
    {
      schema: {
        tags: TAGS,
        summary: 'Create or update a catalog bonus',
        params: BonusCodeParamsSchema,
        body: CatalogBonusRequestSchema,
        response: {
          200: CatalogBonusSavedSchema,
          201: CatalogBonusSavedSchema,
          400: BadRequest,
          409: errorResponse('The code is taken by a catalog entry of a brand the key does not open, or of every brand'),
          413: TooLarge,
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const problem = checkStorable(body);
      if (problem) return reply.code(400).send({ error: problem });
      if (!isCurrency(body.currency)) return reply.code(400).send({ error: 'currency must be an ISO 4217 code' });
      const amount = parseAmount(body.amount, body.currency);
      if (!amount.ok) return reply.code(400).send({ error: `amount ${amount.error}` });
      // An entry for every brand is made and changed only by a key that opens every brand.
      const brandId = body.brand_id === undefined || body.brand_id === null ? null : String(body.brand_id);
      if (brandId === null && request.brands !== null) return reply.code(403).send({ error: 'this credential does not open every brand: give brand_id' });
      const refused = brandId === null ? undefined : brandRefusal(request.brands, brandId);
      if (refused) return reply.code(403).send({ error: refused });
      const saved = await orUnavailable(
        upsertBonus(
          db.pool,
          {
            code: request.params.code,
            brandId,
            label: body.label,
            type: body.type,
            product: body.product,
            amountMinor: amount.minor,
            currency: body.currency,
            validityDays: body.validity_days,
            wageringRequirement: body.wagering_requirement.toFixed(2),
            active: body.active ?? true,
          },
          brandFilter(request.brands),
        ),
      );
      if (saved === 'taken') return reply.code(409).send({ error: `bonus code ${request.params.code} is taken by a catalog entry this credential cannot change` });
      const created = saved === 'created';
      return reply.code(created ? 201 : 200).send({ code: request.params.code, created });
    },
  );

  app.get(
    '/v1/players/:user_id/wallet',
    { schema: { tags: TAGS, summary: "A player's balances", params: PlayerParams, response: { 200: WalletSchema, ...errors } } },
    async (request) => {
      const accounts = await orUnavailable(reads.run((replica) => playerAccounts(replica.pool, brandFilter(request.brands), request.params.user_id)));
      // Both keys for every brand and currency the player holds, as the balance events carry them.
      const wallets = [...new Map(accounts.map((a) => [`${a.brandId}:${a.currency}`, a])).values()];
      return {
        user_id: request.params.user_id,
        balances: wallets.flatMap(({ brandId, currency }) =>
          (['real_money', 'bonus_money'] as const).map((key) => {
            const account = accounts.find((a) => a.brandId === brandId && a.currency === currency && a.kind === key);
            return { brand_id: Number(brandId), currency, key, amount: formatMinor(account?.balanceMinor ?? 0n, currency) };
          }),
        ),
      };
    },
  );

  app.get(
    '/v1/players/:user_id/ledger',
    {
      schema: {
        tags: TAGS,
        summary: "A player's ledger entries",
        params: PlayerParams,
        querystring: LimitQuerySchema,
        response: { 200: LedgerSchema, 400: BadRequest, ...errors },
      },
    },
    async (request) => {
      const entries = await orUnavailable(reads.run((replica) => playerEntries(replica.pool, brandFilter(request.brands), request.params.user_id, Math.min(1000, Number(request.query.limit ?? 100)))));
      return {
        entries: entries.map((e) => ({
          id: e.id,
          brand_id: Number(e.brandId),
          transaction_id: e.transactionId,
          currency: e.currency,
          key: e.kind as 'real_money' | 'bonus_money',
          amount: formatMinor(e.amountMinor, e.currency),
          reason: e.reason,
          created_at: e.createdAt.toISOString(),
        })),
      };
    },
  );

  app.get(
    '/v1/players/:user_id/bonuses',
    { schema: { tags: TAGS, summary: "A player's bonuses", params: PlayerParams, response: { 200: Type.Object({ bonuses: Type.Array(PlayerBonusSchema) }), ...errors } } },
    async (request) => ({
      bonuses: (await orUnavailable(reads.run((replica) => listPlayerBonuses(replica.pool, brandFilter(request.brands), request.params.user_id)))).map((b) => ({
        user_bonus_id: b.id,
        credit_id: b.creditId,
        brand_id: Number(b.brandId),
        bonus_code: b.bonusCode,
        type: b.type,
        product: b.product,
        amount: formatMinor(b.amountMinor, b.currency),
        currency: b.currency,
        required_wagering_amount: formatMinor(b.requiredWageringMinor, b.currency),
        status: b.status,
        expires_at: b.expiresAt.toISOString(),
        created_at: b.createdAt.toISOString(),
        updated_at: b.updatedAt.toISOString(),
      })),
    }),
  );

  app.post(
    '/v1/players/:user_id/bonuses/:id/status',
    {
      schema: {
        tags: TAGS,
        summary: "Move a player's bonus to another status (reported to the CRM once)",
        params: PlayerBonusStatusParamsSchema,
        body: BonusStatusRequestSchema,
        response: {
          200: BonusStatusChangedSchema,
          400: BadRequest,
          404: errorResponse('The player has no such bonus'),
          409: errorResponse('The bonus is in a final status, which it does not leave'),
          413: TooLarge,
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const change = await orUnavailable(changeBonusStatus(bonus, request.params.id.toLowerCase(), request.body.status, request.params.user_id, brandFilter(request.brands)));
      if (!change.ok && change.error === 'not-found') return reply.code(404).send({ error: `player ${request.params.user_id} has no bonus ${request.params.id}` });
      if (!change.ok) return reply.code(409).send({ error: `a bonus in status ${change.from} cannot move to ${request.body.status}` });
      return { user_bonus_id: change.bonus.id, status: change.bonus.status, changed: change.changed };
    },
  );

  app.get(
    '/v1/credits',
    {
      schema: {
        tags: TAGS,
        summary: 'Credits the CRM asked for',
        querystring: CreditQuerySchema,
        response: { 200: Type.Object({ credits: Type.Array(CreditSchema) }), 400: BadRequest, ...errors },
      },
    },
    async (request) => ({
      credits: (await orUnavailable(reads.run((replica) => listCredits(replica.pool, { userId: request.query.user_id, status: request.query.status, limit: Math.min(1000, Number(request.query.limit ?? 100)), brands: brandFilter(request.brands) })))).map(creditView),
    }),
  );

  app.get(
    '/v1/credits/:id',
    {
      schema: {
        tags: TAGS,
        summary: 'One credit, with the request and headers the CRM sent',
        params: Type.Object({ id: Type.String({ description: 'credit_id' }) }),
        response: { 200: CreditSchema, 404: errorResponse('No credit has this id'), ...errors },
      },
    },
    async (request, reply) => {
      const id = request.params.id.toLowerCase();
      // A miss on the replica is asked of the primary: the credit may have been recorded a moment ago.
      const credit = isUuid(id) ? await orUnavailable(readOrPrimary(reads, (replica) => getCredit(replica.pool, id, brandFilter(request.brands)))) : undefined;
      if (!credit) return reply.code(404).send({ error: `no credit ${request.params.id}` });
      return creditView(credit);
    },
  );
};
