import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { checkStorable, isUuid, MAX_WAGERING_MULTIPLE, UUID_PATTERN } from '@operator/contract';
import { BONUS_PRODUCTS, BONUS_STATUSES, BONUS_TYPES, changeBonusStatus, formatMinor, isCurrency, parseAmount, type BonusDeps } from '@operator/bonus';
import { getCredit, listBonuses, listCredits, listPlayerBonuses, playerAccounts, playerEntries, upsertBonus, type CreditRow, type Db } from '@operator/db';
import { orUnavailable } from './unavailable';

const literals = (values: readonly string[]) => Type.Union(values.map((value) => Type.Literal(value)));

const BonusBody = Type.Object({
  label: Type.String({ minLength: 1, maxLength: 200 }),
  type: literals(BONUS_TYPES),
  product: literals(BONUS_PRODUCTS),
  amount: Type.String({ pattern: '^\\d{1,15}(\\.\\d{1,18})?$', errorMessage: 'must be a decimal amount as a string, like "10.00"' }),
  currency: Type.String({ pattern: '^[A-Z]{3}$', errorMessage: 'must be an ISO 4217 code' }),
  validity_days: Type.Integer({ minimum: 1, maximum: 3650 }),
  // With MAX_AMOUNT_MINOR (parseAmount), amount x wagering fits the ledger's bigint.
  wagering_requirement: Type.Number({ minimum: 0, maximum: MAX_WAGERING_MULTIPLE }),
  active: Type.Optional(Type.Boolean()),
});

function creditView(credit: CreditRow) {
  return {
    credit_id: credit.id,
    kind: credit.kind,
    user_id: credit.userId,
    bonus_code: credit.bonusCode,
    amount: formatMinor(credit.amountMinor, credit.currency),
    currency: credit.currency,
    type: credit.type,
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

/** The operator's own back office: the bonus catalog, players' wallets and bonuses, credits. */
export async function bonusAdminRoutes(app: FastifyInstance, { db, bonus }: { db: Db; bonus: BonusDeps }) {
  app.get('/v1/bonuses', async () => ({
    bonuses: (await orUnavailable(listBonuses(db.pool, false))).map((b) => ({
      code: b.code,
      label: b.label,
      type: b.type,
      product: b.product,
      amount: formatMinor(b.amountMinor, b.currency),
      currency: b.currency,
      validity_days: b.validityDays,
      wagering_requirement: Number(b.wageringRequirement),
      active: b.active,
    })),
  }));

  app.put<{ Params: { code: string }; Body: typeof BonusBody.static }>(
    '/v1/bonuses/:code',
    { schema: { params: Type.Object({ code: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,128}$', errorMessage: 'must be letters, digits, _ . -' }) }), body: BonusBody } },
    async (request, reply) => {
      const body = request.body;
      const problem = checkStorable(body);
      if (problem) return reply.code(400).send({ error: problem });
      if (!isCurrency(body.currency)) return reply.code(400).send({ error: 'currency must be an ISO 4217 code' });
      const amount = parseAmount(body.amount, body.currency);
      if (!amount.ok) return reply.code(400).send({ error: `amount ${amount.error}` });
      const created = await orUnavailable(
        upsertBonus(db.pool, {
          code: request.params.code,
          label: body.label,
          type: body.type,
          product: body.product,
          amountMinor: amount.minor,
          currency: body.currency,
          validityDays: body.validity_days,
          wageringRequirement: body.wagering_requirement.toFixed(2),
          active: body.active ?? true,
        }),
      );
      return reply.code(created ? 201 : 200).send({ code: request.params.code, created });
    },
  );

  app.get<{ Params: { user_id: string } }>('/v1/players/:user_id/wallet', async (request) => {
    const accounts = await orUnavailable(playerAccounts(db.pool, request.params.user_id));
    // Both keys for every currency the player holds, as the balance events carry them.
    const currencies = [...new Set(accounts.map((a) => a.currency))];
    return {
      user_id: request.params.user_id,
      balances: currencies.flatMap((currency) =>
        ['real_money', 'bonus_money'].map((key) => {
          const account = accounts.find((a) => a.currency === currency && a.kind === key);
          return { currency, key, amount: formatMinor(account?.balanceMinor ?? 0n, currency) };
        }),
      ),
    };
  });

  app.get<{ Params: { user_id: string }; Querystring: { limit?: string } }>(
    '/v1/players/:user_id/ledger',
    { schema: { querystring: Type.Object({ limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$', errorMessage: 'must be a number' })) }) } },
    async (request) => {
      const entries = await orUnavailable(playerEntries(db.pool, request.params.user_id, Math.min(1000, Number(request.query.limit ?? 100))));
      return {
        entries: entries.map((e) => ({
          id: e.id,
          transaction_id: e.transactionId,
          currency: e.currency,
          key: e.kind,
          amount: formatMinor(e.amountMinor, e.currency),
          reason: e.reason,
          created_at: e.createdAt.toISOString(),
        })),
      };
    },
  );

  app.get<{ Params: { user_id: string } }>('/v1/players/:user_id/bonuses', async (request) => ({
    bonuses: (await orUnavailable(listPlayerBonuses(db.pool, request.params.user_id))).map((b) => ({
      user_bonus_id: b.id,
      credit_id: b.creditId,
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
  }));

  app.post<{ Params: { user_id: string; id: string }; Body: { status: string } }>(
    '/v1/players/:user_id/bonuses/:id/status',
    {
      schema: {
        params: Type.Object({ user_id: Type.String(), id: Type.String({ pattern: UUID_PATTERN, errorMessage: 'must be a user_bonus_id' }) }),
        body: Type.Object({ status: literals(BONUS_STATUSES) }),
      },
    },
    async (request, reply) => {
      const change = await orUnavailable(changeBonusStatus(bonus, request.params.id.toLowerCase(), request.body.status, request.params.user_id));
      if (!change.ok && change.error === 'not-found') return reply.code(404).send({ error: `player ${request.params.user_id} has no bonus ${request.params.id}` });
      if (!change.ok) return reply.code(409).send({ error: `a bonus in status ${change.from} cannot move to ${request.body.status}` });
      return { user_bonus_id: change.bonus.id, status: change.bonus.status, changed: change.changed };
    },
  );

  app.get<{ Querystring: { user_id?: string; status?: string; limit?: string } }>(
    '/v1/credits',
    {
      schema: {
        querystring: Type.Object({
          user_id: Type.Optional(Type.String()),
          status: Type.Optional(literals(['accepted', 'completed', 'failed'])),
          limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$', errorMessage: 'must be a number' })),
        }),
      },
    },
    async (request) => ({
      credits: (await orUnavailable(listCredits(db.pool, { userId: request.query.user_id, status: request.query.status, limit: Math.min(1000, Number(request.query.limit ?? 100)) }))).map(creditView),
    }),
  );

  app.get<{ Params: { id: string } }>('/v1/credits/:id', async (request, reply) => {
    const id = request.params.id.toLowerCase();
    const credit = isUuid(id) ? await orUnavailable(getCredit(db.pool, id)) : undefined;
    if (!credit) return reply.code(404).send({ error: `no credit ${request.params.id}` });
    return creditView(credit);
  });
}
