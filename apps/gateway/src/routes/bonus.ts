import type { FastifyInstance } from 'fastify';
import { checkStorable, rawField, readCrmHeaders, type CrmHeaderField } from '@operator/contract';
import { isText, prepareBonusCredit, prepareFundsCredit, type Prepared } from '@operator/bonus';
import { getBonus, listBonuses, recordCredit, type Db } from '@operator/db';
import { orUnavailable } from './unavailable';

export interface BonusRouteOptions {
  db: Db;
  headerNames: Record<CrmHeaderField, string>;
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * The CRM's bonus endpoints (contract 4.3-4.5, 7.3). A credit is answered 200 once it is recorded
 * in PostgreSQL (the bonus app carries it out); the X-<Word>-Id header makes it exactly once.
 */
export async function bonusRoutes(app: FastifyInstance, { db, headerNames }: BonusRouteOptions) {
  // The CRM fills a dropdown from this; it reads Success/Errors, so even a failure answers 200.
  app.get('/bonus/list', async (request) => {
    try {
      const bonuses = await listBonuses(db.pool, true);
      return { Data: bonuses.map((bonus) => ({ text: bonus.label, value: bonus.code })), Success: true, Errors: [] };
    } catch (error) {
      request.log.error({ err: error }, 'bonus list failed');
      return { Data: [], Success: false, Errors: ['the bonus list is unavailable right now, retry later'] };
    }
  });

  const credit = (kind: 'bonus' | 'funds') => async (request: import('fastify').FastifyRequest, reply: import('fastify').FastifyReply) => {
    const body = request.body;
    if (!isObject(body)) return reply.code(400).send({ error: 'request body must be a JSON object' });
    // The body is kept as sent, extra fields included: all of it must be storable.
    const problem = checkStorable(body);
    if (problem) return reply.code(400).send({ error: problem });
    const checkedHeaders = readCrmHeaders(request.headers, headerNames);
    if (!checkedHeaders.ok) return reply.code(400).send({ error: checkedHeaders.error });
    const headers = checkedHeaders.value;
    if (!headers.id) return reply.code(400).send({ error: `missing ${headerNames.id} header (the idempotency key)` });
    const rawBody = request.rawBody;
    const rawAmount = rawBody === undefined ? undefined : (rawField(rawBody, 'amount') as string | undefined);
    const input = { body, text: rawBody ?? JSON.stringify(body), rawAmount, headers, idempotencyKey: headers.id };
    let prepared: Prepared;
    if (kind === 'bonus') {
      const code = isText(body.bonus_code, 128) ? body.bonus_code : undefined;
      const bonus = code ? await orUnavailable(getBonus(db.pool, code)) : undefined;
      prepared = prepareBonusCredit(input, bonus);
    } else {
      prepared = prepareFundsCredit(input);
    }
    if (!prepared.ok) return reply.code(prepared.status).send({ error: prepared.error });
    const { credit: recorded } = await orUnavailable(recordCredit(db.pool, prepared.credit));
    // A repeat gets the first answer: the same credit, and nothing credited again.
    return reply.code(200).send({ credit_id: recorded.id, status: 'accepted' });
  };

  app.post('/bonus/credit', credit('bonus'));
  app.post('/bonus/credit/funds', credit('funds'));
}
