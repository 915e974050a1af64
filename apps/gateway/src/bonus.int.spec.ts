import { randomUUID } from 'node:crypto';
import { createBonusDeps, processCredit, runBonusRound, type BonusDeps } from '@operator/bonus';
import { getCredit } from '@operator/db';
import { INTERNAL_KEY, OPERATOR_KEY, TcpProxy, uniqueId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// The CRM's bonus endpoints (contract 4.3-4.5, 5.2, 7.3; payload shapes from crm-integration-facts.md)
// and the operator's own back office for bonuses, wallets and credits.

const silentLogger: Parameters<typeof createBonusDeps>[2] = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Response = { statusCode: number; headers: Record<string, unknown>; body: string; json(): any };

const bonusBody = (overrides: Record<string, unknown> = {}) => ({
  label: `Welcome ${uniqueName('label')}`,
  type: 'WelcomeBonus',
  product: 'Casino',
  amount: '10.00',
  currency: 'EUR',
  validity_days: 30,
  wagering_requirement: 35,
  ...overrides,
});

function put(h: Harness, url: string, body: unknown, key = INTERNAL_KEY): Promise<Response> {
  return h.app.inject({ method: 'PUT', url, headers: { 'x-api-key': key, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
}

/** A catalog bonus of this test's own; answers its code and label. */
async function createBonus(h: Harness, overrides: Record<string, unknown> = {}) {
  const code = uniqueName('bonus');
  const body = bonusBody(overrides);
  const response = await put(h, `/v1/bonuses/${code}`, body);
  if (response.statusCode !== 201) throw new Error(`bonus creation failed: ${response.statusCode} ${response.body}`);
  return { code, label: body.label as string };
}

/** The six headers of contract 5.2, as the CRM sends them for one trigger of one player. */
function crmHeaders(overrides: Record<string, string> = {}, word = 'Service'): Record<string, string> {
  return {
    [`X-${word}-Id`]: uniqueName('svc'),
    [`X-${word}-Activityid`]: String(uniqueId()),
    [`X-${word}-Actionid`]: '7',
    [`X-${word}-Actiongroupid`]: '3',
    [`X-${word}-Actioncommunicationprofileid`]: '11',
    [`X-${word}-Triggerhash`]: uniqueName('hash'),
    ...overrides,
  };
}

const creditBonus = (h: Harness, body: unknown, headers: Record<string, string> = crmHeaders()) => h.post('/bonus/credit', body, headers);
const creditFunds = (h: Harness, body: unknown, headers: Record<string, string> = crmHeaders()) => h.post('/bonus/credit/funds', body, headers);

async function creditView(h: Harness, id: string) {
  const response = await h.internal('GET', `/v1/credits/${id}`);
  expect(response.statusCode).toBe(200);
  return response.json();
}

const deps = (h: Harness): BonusDeps => createBonusDeps(h.stores.db, h.stores.config, silentLogger);

/**
 * Runs the bonus worker until this credit is carried out. Another worker on the shared test
 * database may hold it for a while, so this waits for its status rather than for one round.
 */
async function settle(h: Harness, creditId: string, ms = 20000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    await runBonusRound(deps(h));
    const row = await h.stores.db.credit.findUnique({ where: { id: creditId } });
    if (row && row.status !== 'accepted') return row.status;
    if (Date.now() > deadline) throw new Error(`credit ${creditId} was not carried out within ${ms} ms`);
    await sleep(50);
  }
}

const bonusEvents = (h: Harness, userBonusId: string) =>
  h.stores.db.event.findMany({ where: { topic: 'bonus', orderingKey: `bonus:${userBonusId}` }, orderBy: { seq: 'asc' } });

async function playerBonuses(h: Harness, userId: string) {
  const response = await h.internal('GET', `/v1/players/${userId}/bonuses`);
  expect(response.statusCode).toBe(200);
  return response.json().bonuses as any[];
}

async function wallet(h: Harness, userId: string) {
  const response = await h.internal('GET', `/v1/players/${userId}/wallet`);
  expect(response.statusCode).toBe(200);
  return response.json();
}

async function ledger(h: Harness, userId: string) {
  const response = await h.internal('GET', `/v1/players/${userId}/ledger`);
  expect(response.statusCode).toBe(200);
  return response.json().entries as any[];
}

const expectError = (response: Response, status: number) => {
  expect({ status: response.statusCode, body: response.json() }).toEqual({ status, body: { error: expect.any(String), code: status } });
};

/** A wallet that refuses every credit for good (an operator platform answering 4xx). */
const refusingDeps = (h: Harness): BonusDeps => ({
  ...deps(h),
  wallet: { postsToLedger: false, timeoutMs: 1000, carryOut: async () => ({ ok: false, retry: false, error: 'refused by the test platform' }) },
});

describe('bonus endpoints', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await Harness.open();
  });
  afterAll(async () => {
    await h.close();
  });


  describe('GET /bonus/list', () => {
    it('answers {"Data":[{"text","value"}],"Success":true,"Errors":[]} with exact casing, active bonuses only', async () => {
      const active = await createBonus(h);
      const inactive = await createBonus(h, { active: false });

      const response = await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': OPERATOR_KEY } });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      const body = response.json();
      expect(Object.keys(body)).toEqual(['Data', 'Success', 'Errors']);
      expect(body.Success).toBe(true);
      expect(body.Errors).toEqual([]);
      expect(Array.isArray(body.Data)).toBe(true);
      for (const entry of body.Data) {
        expect(Object.keys(entry)).toEqual(['text', 'value']);
        expect(typeof entry.text).toBe('string');
        expect(typeof entry.value).toBe('string');
      }
      expect(body.Data).toContainEqual({ text: active.label, value: active.code });
      expect(body.Data.map((entry: { value: string }) => entry.value)).not.toContain(inactive.code);
      // The exact text the CRM parses: its key casing is significant.
      expect(response.body).toContain(`{"text":${JSON.stringify(active.label)},"value":${JSON.stringify(active.code)}}`);
      expect(response.body.startsWith('{"Data":[')).toBe(true);
      expect(response.body.endsWith('],"Success":true,"Errors":[]}')).toBe(true);
    });

    it('lists a bonus once it is made active again', async () => {
      const bonus = await createBonus(h, { active: false });
      const values = async () => (await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': OPERATOR_KEY } })).json().Data.map((d: { value: string }) => d.value);
      expect(await values()).not.toContain(bonus.code);
      expect((await put(h, `/v1/bonuses/${bonus.code}`, bonusBody({ label: bonus.label, active: true }))).statusCode).toBe(200);
      expect(await values()).toContain(bonus.code);
    });

    it('answers 401 without an API key, with a wrong one, and with the internal key', async () => {
      for (const headers of [{}, { 'x-api-key': 'wrong' }, { 'x-api-key': INTERNAL_KEY }] as Record<string, string>[]) {
        const response = await h.app.inject({ method: 'GET', url: '/bonus/list', headers });
        expectError(response, 401);
      }
    });
  });

  describe('POST /bonus/credit', () => {
    it('answers 200 {credit_id, status: accepted} and records the credit with the catalog amount', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const response = await creditBonus(h, { user_id: userId, bonus_code: bonus.code });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body).toEqual({ credit_id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: 'accepted' });

      const credit = await creditView(h, body.credit_id);
      expect(credit).toMatchObject({
        credit_id: body.credit_id,
        kind: 'bonus',
        user_id: userId,
        bonus_code: bonus.code,
        amount: '10.00',
        currency: 'EUR',
        type: 'WelcomeBonus',
        status: 'accepted',
        error: null,
      });
    });

    it('accepts and keeps extra fields (validity_amount, a nested object) exactly as sent', async () => {
      const bonus = await createBonus(h);
      const body = {
        user_id: uniqueName('player'),
        bonus_code: bonus.code,
        validity_amount: 30,
        campaign: { name: 'spring', tags: ['vip', 'casino'], weight: 1.5, nested: { deep: true, none: null } },
        note: 'ünïcödé ✓',
      };
      const response = await creditBonus(h, body);
      expect(response.statusCode).toBe(200);
      const credit = await creditView(h, response.json().credit_id);
      expect(credit.request).toEqual(body);
    });

    it('stores the six CRM headers of contract 5.2 with the credit', async () => {
      const bonus = await createBonus(h);
      const headers = crmHeaders();
      const response = await creditBonus(h, { user_id: uniqueName('player'), bonus_code: bonus.code }, headers);
      expect(response.statusCode).toBe(200);
      const credit = await creditView(h, response.json().credit_id);
      expect(credit.headers).toEqual({
        id: headers['X-Service-Id'],
        activity_id: headers['X-Service-Activityid'],
        action_id: '7',
        action_group_id: '3',
        action_communication_profile_id: '11',
        trigger_hash: headers['X-Service-Triggerhash'],
      });
    });

    it('answers 404 {error} for an unknown bonus code and 422 for an inactive one, recording nothing', async () => {
      const userId = uniqueName('player');
      expectError(await creditBonus(h, { user_id: userId, bonus_code: uniqueName('no-such-bonus') }), 404);
      const inactive = await createBonus(h, { active: false });
      expectError(await creditBonus(h, { user_id: userId, bonus_code: inactive.code }), 422);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(0);
    });

    it.each([
      ['user_id is missing', (code: string) => ({ bonus_code: code })],
      ['user_id is empty', (code: string) => ({ user_id: '', bonus_code: code })],
      ['user_id is a number', (code: string) => ({ user_id: 42, bonus_code: code })],
      ['bonus_code is missing', () => ({ user_id: 'p' })],
      ['bonus_code is a number', () => ({ user_id: 'p', bonus_code: 7 })],
      ['currency is lower case', (code: string) => ({ user_id: 'p', bonus_code: code, currency: 'eur' })],
      ['currency is unknown', (code: string) => ({ user_id: 'p', bonus_code: code, currency: 'XYZ' })],
      ['amount is zero', (code: string) => ({ user_id: 'p', bonus_code: code, amount: 0 })],
      ['amount has more decimals than EUR', (code: string) => ({ user_id: 'p', bonus_code: code, amount: 1.005 })],
      ['amount is not a number', (code: string) => ({ user_id: 'p', bonus_code: code, amount: 'ten' })],
    ])('answers 400 {error} when %s', async (_case, body) => {
      const bonus = await createBonus(h);
      expectError(await creditBonus(h, body(bonus.code)), 400);
    });

    it.each([
      ['an array', '[]'],
      ['a string', '"credit"'],
      ['a number', '42'],
      ['null', 'null'],
    ])('answers 400 {error} when the body is %s', async (_case, text) => {
      expectError(await creditBonus(h, text), 400);
    });

    it('answers 400 {error} to invalid JSON and to an empty body', async () => {
      expectError(await creditBonus(h, '{"user_id": "p", "bonus_code": '), 400);
      expectError(await creditBonus(h, '{user_id: "p"}'), 400);
      const empty = await h.app.inject({
        method: 'POST',
        url: '/bonus/credit',
        headers: { 'content-type': 'application/json', 'x-api-key': OPERATOR_KEY, ...crmHeaders() },
      });
      expectError(empty, 400);
    });

    it('answers 400 {error} naming the header when X-Service-Id (the idempotency key) is missing', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const { 'X-Service-Id': _id, ...rest } = crmHeaders();
      const response = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, rest);
      expectError(response, 400);
      expect(response.json().error).toMatch(/x-service-id/i);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(0);
    });

    it('answers 401 without the CRM key and with the internal key', async () => {
      const bonus = await createBonus(h);
      for (const key of [undefined, INTERNAL_KEY]) {
        const response = await h.app.inject({
          method: 'POST',
          url: '/bonus/credit',
          headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}), ...crmHeaders() },
          payload: JSON.stringify({ user_id: uniqueName('player'), bonus_code: bonus.code }),
        });
        expectError(response, 401);
      }
    });

    it('overrides the catalog amount and currency: amount 12.5 EUR is 1250 minor units ("12.50")', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const response = await creditBonus(h, { user_id: userId, bonus_code: bonus.code, amount: 12.5, currency: 'EUR' });
      expect(response.statusCode).toBe(200);
      const creditId = response.json().credit_id;
      expect(await creditView(h, creditId)).toMatchObject({ amount: '12.50', currency: 'EUR' });
      expect((await h.stores.db.credit.findUnique({ where: { id: creditId } }))?.amountMinor).toBe(1250n);

      expect(await settle(h, creditId)).toBe('completed');
      expect(await playerBonuses(h, userId)).toEqual([expect.objectContaining({ credit_id: creditId, amount: '12.50', currency: 'EUR', status: 'Created' })]);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '12.50' },
      ]);
    });

    it('takes another currency with an amount (USD 5 -> "5.00"), an amount as a decimal string, and JPY without decimals', async () => {
      const bonus = await createBonus(h);
      const usd = await creditBonus(h, { user_id: uniqueName('player'), bonus_code: bonus.code, amount: 5, currency: 'USD' });
      expect(usd.statusCode).toBe(200);
      expect(await creditView(h, usd.json().credit_id)).toMatchObject({ amount: '5.00', currency: 'USD' });

      const text = await creditBonus(h, { user_id: uniqueName('player'), bonus_code: bonus.code, amount: '7.5' });
      expect(text.statusCode).toBe(200);
      expect(await creditView(h, text.json().credit_id)).toMatchObject({ amount: '7.50', currency: 'EUR' });

      const jpy = await creditBonus(h, { user_id: uniqueName('player'), bonus_code: bonus.code, amount: 1000, currency: 'JPY' });
      expect(jpy.statusCode).toBe(200);
      expect(await creditView(h, jpy.json().credit_id)).toMatchObject({ amount: '1000', currency: 'JPY' });
      expectError(await creditBonus(h, { user_id: uniqueName('player'), bonus_code: bonus.code, amount: 10.5, currency: 'JPY' }), 400);
    });

    it('answers 400, not a 500 the CRM would retry forever, to a NUL character in user_id or bonus_code', async () => {
      const bonus = await createBonus(h);
      for (const text of [
        `{"user_id":"a\\u0000b","bonus_code":${JSON.stringify(bonus.code)}}`,
        `{"user_id":"p","bonus_code":"x\\u0000y"}`,
        `{"user_id":"p","bonus_code":${JSON.stringify(`${bonus.code}\u0000`)}}`,
      ]) {
        const response = await creditBonus(h, text);
        expect({ text, status: response.statusCode }).toEqual({ text, status: 400 });
        expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      }
    });

    it('accepts a body that starts with a UTF-8 byte order mark, and keeps it as sent without the mark', async () => {
      const bonus = await createBonus(h);
      const body = { user_id: uniqueName('player'), bonus_code: bonus.code, amount: 12.5, validity_amount: 3 };
      const response = await creditBonus(h, `\uFEFF${JSON.stringify(body)}`);
      expect(response.statusCode).toBe(200);
      const credit = await creditView(h, response.json().credit_id);
      expect(credit.request).toEqual(body);
      expect(credit.amount).toBe('12.50');
    });

    it("answers 400 to a currency other than the bonus's without an amount", async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const response = await creditBonus(h, { user_id: userId, bonus_code: bonus.code, currency: 'USD' });
      expectError(response, 400);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(0);
      // The bonus's own currency without an amount is just the catalog bonus.
      const same = await creditBonus(h, { user_id: userId, bonus_code: bonus.code, currency: 'EUR' });
      expect(same.statusCode).toBe(200);
      expect(await creditView(h, same.json().credit_id)).toMatchObject({ amount: '10.00', currency: 'EUR' });
    });
  });

  describe('CRM_HEADER_WORD=Acme', () => {
    let acme: Harness;

    beforeAll(async () => {
      acme = await Harness.open({ CRM_HEADER_WORD: 'Acme' });
    });
    afterAll(async () => {
      await acme.close();
    });

    it('takes X-Acme-Id as the idempotency key, stores the X-Acme-* headers, and reports them as acme_references', async () => {
      const bonus = await createBonus(acme);
      const userId = uniqueName('player');
      const headers = crmHeaders({}, 'Acme');
      const first = await creditBonus(acme, { user_id: userId, bonus_code: bonus.code }, headers);
      expect(first.statusCode).toBe(200);
      const creditId = first.json().credit_id;
      const again = await creditBonus(acme, { user_id: userId, bonus_code: bonus.code }, { 'X-Acme-Id': headers['X-Acme-Id'] });
      expect(again.json().credit_id).toBe(creditId);

      const credit = await creditView(acme, creditId);
      expect(credit.headers).toEqual({
        id: headers['X-Acme-Id'],
        activity_id: headers['X-Acme-Activityid'],
        action_id: '7',
        action_group_id: '3',
        action_communication_profile_id: '11',
        trigger_hash: headers['X-Acme-Triggerhash'],
      });

      expect(await settle(acme, creditId)).toBe('completed');
      const [playerBonus] = await playerBonuses(acme, userId);
      const [event] = await bonusEvents(acme, playerBonus.user_bonus_id);
      expect(event.body).toMatchObject({
        acme_references: {
          id: headers['X-Acme-Id'],
          activity_id: Number(headers['X-Acme-Activityid']),
          action_id: 7,
          action_group_id: 3,
          action_communication_profile_id: 11,
          trigger_hash: headers['X-Acme-Triggerhash'],
        },
      });
      expect(event.body).not.toHaveProperty('service_references');
    });

    it('answers 400 when only X-Service-Id is sent', async () => {
      const bonus = await createBonus(acme);
      const userId = uniqueName('player');
      const response = await creditBonus(acme, { user_id: userId, bonus_code: bonus.code }, crmHeaders());
      expectError(response, 400);
      expect(response.json().error).toMatch(/x-acme-id/i);
      expect(await acme.stores.db.credit.count({ where: { userId } })).toBe(0);
    });
  });

  describe('POST /bonus/credit/funds', () => {
    it('answers 200, records a cashback funds credit and credits real money once carried out', async () => {
      const userId = uniqueName('player');
      const response = await creditFunds(h, { user_id: userId, amount: 25.5, currency: 'EUR' });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ credit_id: expect.any(String), status: 'accepted' });
      const creditId = response.json().credit_id;
      expect(await creditView(h, creditId)).toMatchObject({ kind: 'funds', user_id: userId, bonus_code: null, amount: '25.50', currency: 'EUR', type: 'cashback' });

      expect(await settle(h, creditId)).toBe('completed');
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '25.50' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
      expect(await ledger(h, userId)).toEqual([expect.objectContaining({ currency: 'EUR', key: 'real_money', amount: '25.50', reason: 'funds-cashback' })]);
      // Funds are no player bonus: no bonus, no bonus event; the wallet change is reported.
      expect(await playerBonuses(h, userId)).toEqual([]);
      expect(await h.stores.db.event.count({ where: { topic: 'balance', orderingKey: `balance:${userId}` } })).toBe(1);
    });

    it('keeps the type and bonus_code given', async () => {
      const response = await creditFunds(h, { user_id: uniqueName('player'), amount: 3, currency: 'EUR', type: 'wheel', bonus_code: 'spin-42' });
      expect(response.statusCode).toBe(200);
      expect(await creditView(h, response.json().credit_id)).toMatchObject({ type: 'wheel', bonus_code: 'spin-42', amount: '3.00' });
    });

    it.each([
      ['amount 0', { amount: 0, currency: 'EUR' }],
      ['a negative amount', { amount: -5, currency: 'EUR' }],
      ['amount "abc"', { amount: 'abc', currency: 'EUR' }],
      ['amount "-1.00"', { amount: '-1.00', currency: 'EUR' }],
      ['amount ""', { amount: '', currency: 'EUR' }],
      ['amount true', { amount: true, currency: 'EUR' }],
      ['amount null', { amount: null, currency: 'EUR' }],
      ['no amount', { currency: 'EUR' }],
      ['12.345 EUR (more decimals than the currency)', { amount: 12.345, currency: 'EUR' }],
      ['"12.345" EUR as text', { amount: '12.345', currency: 'EUR' }],
      ['JPY with decimals', { amount: 100.5, currency: 'JPY' }],
      ['unknown currency XYZ', { amount: 10, currency: 'XYZ' }],
      ['lower-case currency eur', { amount: 10, currency: 'eur' }],
      ['no currency', { amount: 10 }],
      ['a type that is not a string', { amount: 10, currency: 'EUR', type: 5 }],
    ])('answers 400 {error} to %s', async (_case, fields) => {
      const userId = uniqueName('player');
      expectError(await creditFunds(h, { user_id: userId, ...fields }), 400);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(0);
    });

    it('answers 400, not 500, to a NUL character in user_id, type or bonus_code', async () => {
      for (const fields of [{ user_id: 'a\u0000b' }, { type: 'cash\u0000back' }, { bonus_code: 'b\u0000' }]) {
        const response = await creditFunds(h, { user_id: uniqueName('player'), amount: 5, currency: 'EUR', ...fields });
        expect({ fields, status: response.statusCode }).toEqual({ fields, status: 400 });
      }
    });

    it('reads a numeric amount of a body that starts with a UTF-8 byte order mark', async () => {
      const body = { user_id: uniqueName('player'), amount: 19.99, currency: 'EUR' };
      const response = await creditFunds(h, `\uFEFF${JSON.stringify(body)}`);
      expect(response.statusCode).toBe(200);
      const credit = await creditView(h, response.json().credit_id);
      expect(credit).toMatchObject({ amount: '19.99', request: body });
    });

    it('answers 400 when user_id is missing, when the body is not an object, and to invalid JSON', async () => {
      expectError(await creditFunds(h, { amount: 10, currency: 'EUR' }), 400);
      expectError(await creditFunds(h, '[{"user_id":"p","amount":10,"currency":"EUR"}]'), 400);
      expectError(await creditFunds(h, '{"user_id":"p","amount":10,'), 400);
      const { 'X-Service-Id': _id, ...rest } = crmHeaders();
      expectError(await creditFunds(h, { user_id: 'p', amount: 10, currency: 'EUR' }, rest), 400);
    });

    it.each([
      ['0.1 EUR', 0.1, 'EUR', '0.10'],
      ['19.99 EUR', 19.99, 'EUR', '19.99'],
      ['12.340 EUR (trailing zero)', '12.340', 'EUR', '12.34'],
      ['"19.99" EUR as a decimal string', '19.99', 'EUR', '19.99'],
      ['500 JPY', 500, 'JPY', '500'],
      ['1.250 BHD (three decimals)', 1.25, 'BHD', '1.250'],
    ])('accepts %s exactly', async (_case, amount, currency, expected) => {
      const response = await creditFunds(h, { user_id: uniqueName('player'), amount, currency });
      expect(response.statusCode).toBe(200);
      expect(await creditView(h, response.json().credit_id)).toMatchObject({ amount: expected, currency });
    });

    it('answers 400 to exponent notation (amount 1e2): the exact decimal parser refuses it rather than guessing', async () => {
      // JSON's 1e2 is 100, but amounts are read from their text digit for digit; the CRM sends plain decimals.
      const userId = uniqueName('player');
      const response = await creditFunds(h, `{"user_id":${JSON.stringify(userId)},"amount":1e2,"currency":"EUR"}`);
      expectError(response, 400);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(0);
    });

    it('keeps the largest amount digit for digit, and refuses 999999999999999.99 EUR (over it) with 400 rather than a credit the ledger cannot hold', async () => {
      const userId = uniqueName('player');
      const response = await creditFunds(h, `{"user_id":${JSON.stringify(userId)},"amount":1000000000000.00,"currency":"EUR"}`);
      expect(response.statusCode).toBe(200);
      expect((await h.stores.db.credit.findUnique({ where: { id: response.json().credit_id } }))?.amountMinor).toBe(100000000000000n);
      const over = await creditFunds(h, `{"user_id":${JSON.stringify(userId)},"amount":999999999999999.99,"currency":"EUR"}`);
      expect(over.statusCode).toBe(400);
      expect(over.json()).toEqual({ error: 'amount must be at most 1000000000000.00 EUR', code: over.statusCode });
      // Not carried out: the house ledger of the shared test database is not for this much.
      const row = await getCredit(h.stores.db.pool, response.json().credit_id);
      await processCredit(refusingDeps(h), row!);
    });
  });

  describe('exactly once', () => {
    it('answers a repeated X-Service-Id with the same credit and carries it out once', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const headers = crmHeaders();
      const body = { user_id: userId, bonus_code: bonus.code };
      const first = await creditBonus(h, body, headers);
      const second = await creditBonus(h, body, headers);
      expect(first.statusCode).toBe(200);
      expect(second.statusCode).toBe(200);
      const creditId = first.json().credit_id;
      expect(second.json()).toEqual({ credit_id: creditId, status: 'accepted' });

      expect(await settle(h, creditId)).toBe('completed');
      // A retry after the credit was carried out still gets the first answer, and changes nothing.
      const third = await creditBonus(h, body, headers);
      expect(third.statusCode).toBe(200);
      expect(third.json().credit_id).toBe(creditId);
      await runBonusRound(deps(h));

      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(1);
      expect(await ledger(h, userId)).toEqual([expect.objectContaining({ transaction_id: creditId, currency: 'EUR', key: 'bonus_money', amount: '10.00', reason: 'bonus-credit' })]);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '10.00' },
      ]);
      // The house leg of the same transaction: the entry pair balances.
      const legs = await h.stores.db.ledgerEntry.findMany({ where: { transactionId: creditId } });
      expect(legs.map((leg) => leg.amountMinor).sort((a, b) => (a < b ? -1 : 1))).toEqual([-1000n, 1000n]);

      const bonuses = await playerBonuses(h, userId);
      expect(bonuses).toHaveLength(1);
      const events = await bonusEvents(h, bonuses[0].user_bonus_id);
      expect(events.map((event) => event.status)).toEqual(['Created']);
      expect(
        await h.stores.db.event.count({ where: { topic: 'bonus', orderingKey: `bonus:${bonuses[0].user_bonus_id}` } }),
      ).toBe(1);
      expect(events[0].body).toMatchObject({
        amount: 10,
        bonus_id: bonus.code,
        currency: 'EUR',
        user_bonus_id: bonuses[0].user_bonus_id,
        user_id: userId,
        product: 'Casino',
        status: 'Created',
        type: 'WelcomeBonus',
        required_wagering_amount: 350,
        service_references: {
          id: headers['X-Service-Id'],
          activity_id: Number(headers['X-Service-Activityid']),
          action_id: 7,
          action_group_id: 3,
          action_communication_profile_id: 11,
          trigger_hash: headers['X-Service-Triggerhash'],
        },
      });
      expect(await h.stores.db.event.count({ where: { topic: 'balance', orderingKey: `balance:${userId}` } })).toBe(1);
    });

    it('answers 20 concurrent copies with one credit, one entry pair and one bonus event', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const headers = crmHeaders();
      const responses = await Promise.all(Array.from({ length: 20 }, () => creditBonus(h, { user_id: userId, bonus_code: bonus.code }, headers)));
      expect(responses.map((r) => r.statusCode)).toEqual(Array(20).fill(200));
      const ids = new Set(responses.map((r) => r.json().credit_id));
      expect(ids.size).toBe(1);
      const [creditId] = [...ids];
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(1);

      // Several workers racing for it still carry it out once.
      await Promise.all([settle(h, creditId), runBonusRound(deps(h)), runBonusRound(deps(h))]);
      expect(await ledger(h, userId)).toHaveLength(1);
      expect(await h.stores.db.ledgerEntry.count({ where: { transactionId: creditId } })).toBe(2);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '10.00' },
      ]);
      const bonuses = await playerBonuses(h, userId);
      expect(bonuses).toHaveLength(1);
      expect(await h.stores.db.event.count({ where: { topic: 'bonus', orderingKey: `bonus:${bonuses[0].user_bonus_id}` } })).toBe(1);
    });

    it('answers 20 concurrent funds copies with one credit and one real-money entry', async () => {
      const userId = uniqueName('player');
      const headers = crmHeaders();
      const responses = await Promise.all(Array.from({ length: 20 }, () => creditFunds(h, { user_id: userId, amount: '4.20', currency: 'EUR' }, headers)));
      expect(responses.map((r) => r.statusCode)).toEqual(Array(20).fill(200));
      const ids = new Set(responses.map((r) => r.json().credit_id));
      expect(ids.size).toBe(1);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(1);
      await settle(h, [...ids][0]);
      expect(await ledger(h, userId)).toHaveLength(1);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '4.20' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
    });

    it('treats the same activity, action, trigger hash and user_id under another X-Service-Id as the same credit (contract 5.2)', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const headers = crmHeaders();
      const first = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, headers);
      const other = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, { ...headers, 'X-Service-Id': uniqueName('svc') });
      expect(first.statusCode).toBe(200);
      expect(other.statusCode).toBe(200);
      expect(other.json().credit_id).toBe(first.json().credit_id);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(1);

      // Another trigger hash is another send: a credit of its own.
      const next = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, { ...headers, 'X-Service-Id': uniqueName('svc'), 'X-Service-Triggerhash': uniqueName('hash') });
      expect(next.statusCode).toBe(200);
      expect(next.json().credit_id).not.toBe(first.json().credit_id);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(2);
    });

    it('gives each player of a time-based activity (same headers tuple, another user_id) a credit of their own', async () => {
      const bonus = await createBonus(h);
      const headers = crmHeaders();
      const players = [uniqueName('player'), uniqueName('player'), uniqueName('player')];
      const responses = await Promise.all(
        players.map((userId) => creditBonus(h, { user_id: userId, bonus_code: bonus.code }, { ...headers, 'X-Service-Id': uniqueName('svc') })),
      );
      expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200]);
      expect(new Set(responses.map((r) => r.json().credit_id)).size).toBe(3);
      for (const userId of players) expect(await h.stores.db.credit.count({ where: { userId } })).toBe(1);
      for (const response of responses) expect(await settle(h, response.json().credit_id)).toBe('completed');
      for (const userId of players) expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '10.00' },
      ]);
    });

    it('answers 409 to the same X-Service-Id for another player and amount, and credits nothing for it', async () => {
      const [first, second] = [uniqueName('mm'), uniqueName('mm')];
      const headers = crmHeaders();
      const answer = await creditFunds(h, { user_id: first, amount: 5.0, currency: 'EUR' }, headers);
      expect(answer.statusCode).toBe(200);
      const creditId = answer.json().credit_id;

      const other = await creditFunds(h, { user_id: second, amount: '250.00', currency: 'EUR' }, { ...headers, 'X-Service-Triggerhash': uniqueName('hash') });
      expect(other.statusCode).toBe(409);
      expect(other.json()).toEqual({ error: expect.stringContaining(headers['X-Service-Id']), code: 409 });
      // The same key on the other endpoint is another request too.
      const bonus = await createBonus(h);
      expect((await creditBonus(h, { user_id: first, bonus_code: bonus.code }, headers)).statusCode).toBe(409);

      expect(await settle(h, creditId)).toBe('completed');
      expect(await h.stores.db.credit.count({ where: { userId: second } })).toBe(0);
      expect(await h.stores.db.credit.findUnique({ where: { id: creditId } })).toMatchObject({ userId: first, amountMinor: 500n, kind: 'funds' });
      expect(await ledger(h, second)).toEqual([]);
      expect((await wallet(h, first)).balances).toContainEqual({ brand_id: 0, currency: 'EUR', key: 'real_money', amount: '5.00' });
    });

    it('answers a repeat of the same request, however its JSON is written, with the first credit', async () => {
      const userId = uniqueName('player');
      const headers = crmHeaders();
      const first = await creditFunds(h, `{"user_id":"${userId}","amount":5,"currency":"EUR","meta":{"a":1,"b":[1,2]}}`, headers);
      // Other key order at every depth, other spacing, and the same amount written otherwise.
      const again = await creditFunds(h, `{ "meta": { "b": [1, 2], "a": 1 },\n  "currency": "EUR", "amount": "5.00", "user_id": "${userId}" }`, headers);
      expect(first.statusCode).toBe(200);
      expect(again.statusCode).toBe(200);
      expect(again.json().credit_id).toBe(first.json().credit_id);
      // A field of the body that differs is another request.
      const changed = await creditFunds(h, `{"user_id":"${userId}","amount":5,"currency":"EUR","meta":{"a":2,"b":[1,2]}}`, headers);
      expect(changed.statusCode).toBe(409);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(1);
    });

    it('answers 409 to the same activity, action, trigger hash and user_id asking another amount under another X-Service-Id (contract 5.2)', async () => {
      const userId = uniqueName('player');
      const headers = crmHeaders();
      const first = await creditFunds(h, { user_id: userId, amount: '5.00', currency: 'EUR' }, headers);
      const other = await creditFunds(h, { user_id: userId, amount: '250.00', currency: 'EUR' }, { ...headers, 'X-Service-Id': uniqueName('svc') });
      expect(first.statusCode).toBe(200);
      expect(other.statusCode).toBe(409);
      expect(other.json()).toEqual({ error: expect.stringContaining(first.json().credit_id), code: 409 });
      expect(await h.stores.db.credit.findMany({ where: { userId }, select: { id: true, amountMinor: true } })).toEqual([{ id: first.json().credit_id, amountMinor: 500n }]);
      expect(await settle(h, first.json().credit_id)).toBe('completed');
      expect((await wallet(h, userId)).balances).toContainEqual({ brand_id: 0, currency: 'EUR', key: 'real_money', amount: '5.00' });
    });

    it('without the tuple headers, only X-Service-Id deduplicates', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const first = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, { 'X-Service-Id': uniqueName('svc') });
      const second = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, { 'X-Service-Id': uniqueName('svc') });
      expect(first.statusCode).toBe(200);
      expect(second.statusCode).toBe(200);
      expect(second.json().credit_id).not.toBe(first.json().credit_id);
      expect(await h.stores.db.credit.count({ where: { userId } })).toBe(2);
    });
  });

  describe('internal API', () => {
    it('PUT /v1/bonuses/:code answers 201 when it creates, 200 when it replaces; GET /v1/bonuses lists amounts as decimal strings', async () => {
      const code = uniqueName('bonus');
      const created = await put(h, `/v1/bonuses/${code}`, bonusBody({ label: 'First' }));
      expect(created.statusCode).toBe(201);
      expect(created.json()).toEqual({ code, created: true });
      const replaced = await put(h, `/v1/bonuses/${code}`, bonusBody({ label: 'Second', amount: '12.5', wagering_requirement: 20.5, type: 'ReloadBonus', product: 'Sportsbook' }));
      expect(replaced.statusCode).toBe(200);
      expect(replaced.json()).toEqual({ code, created: false });

      const jpy = uniqueName('bonus');
      expect((await put(h, `/v1/bonuses/${jpy}`, bonusBody({ amount: '500', currency: 'JPY', active: false }))).statusCode).toBe(201);

      const listed = await h.internal('GET', '/v1/bonuses');
      expect(listed.statusCode).toBe(200);
      const bonuses = listed.json().bonuses as any[];
      expect(bonuses.find((b) => b.code === code)).toEqual({
        code,
        label: 'Second',
        type: 'ReloadBonus',
        product: 'Sportsbook',
        amount: '12.50',
        currency: 'EUR',
        validity_days: 30,
        wagering_requirement: 20.5,
        active: true,
        brand_id: null,
      });
      // The back office lists inactive bonuses too.
      expect(bonuses.find((b) => b.code === jpy)).toMatchObject({ amount: '500', currency: 'JPY', active: false });
    });

    it.each([
      ['type Nope', { type: 'Nope' }],
      ['product Bingo', { product: 'Bingo' }],
      ['amount with too many decimals', { amount: '10.001' }],
      ['decimals on a JPY amount', { amount: '1.5', currency: 'JPY' }],
      ['amount zero', { amount: '0.00' }],
      ['amount as a JSON number', { amount: 10 }],
      ['amount negative', { amount: '-1.00' }],
      ['unknown currency XYZ', { currency: 'XYZ' }],
      ['lower-case currency', { currency: 'eur' }],
      ['missing label', { label: undefined }],
      ['empty label', { label: '' }],
      ['validity_days 0', { validity_days: 0 }],
      ['negative wagering', { wagering_requirement: -1 }],
    ])('PUT /v1/bonuses/:code answers 400 {error} to %s', async (_case, overrides) => {
      const code = uniqueName('bonus');
      const response = await put(h, `/v1/bonuses/${code}`, bonusBody(overrides));
      expectError(response, 400);
      expect(await h.stores.db.bonus.count({ where: { code } })).toBe(0);
    });

    it('PUT /v1/bonuses/:code answers 400 to a code with characters outside [A-Za-z0-9_.-]', async () => {
      expectError(await put(h, `/v1/bonuses/${encodeURIComponent('bad code!')}`, bonusBody()), 400);
    });

    it('answers 401 to the CRM key on every /v1 route', async () => {
      const requests: [string, string, unknown?][] = [
        ['GET', '/v1/bonuses'],
        ['PUT', `/v1/bonuses/${uniqueName('bonus')}`, bonusBody()],
        ['GET', '/v1/players/p/wallet'],
        ['GET', '/v1/players/p/ledger'],
        ['GET', '/v1/players/p/bonuses'],
        ['POST', `/v1/players/p/bonuses/${randomUUID()}/status`, { status: 'Forfeited' }],
        ['GET', '/v1/credits'],
        ['GET', `/v1/credits/${randomUUID()}`],
      ];
      for (const [method, url, body] of requests) {
        const response = await h.app.inject({
          method: method as 'GET',
          url,
          headers: { 'x-api-key': OPERATOR_KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          payload: body === undefined ? undefined : JSON.stringify(body),
        });
        expect({ url, status: response.statusCode }).toEqual({ url, status: 401 });
      }
    });

    it('GET /v1/players/:id/wallet answers no balances for an unknown player', async () => {
      const userId = uniqueName('player');
      expect(await wallet(h, userId)).toEqual({ user_id: userId, balances: [] });
      expect(await ledger(h, userId)).toEqual([]);
      expect(await playerBonuses(h, userId)).toEqual([]);
    });

    it('shows a credited bonus in wallet and bonuses, forfeits it once, and refuses to move it on', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const response = await creditBonus(h, { user_id: userId, bonus_code: bonus.code });
      const creditId = response.json().credit_id;
      expect(await settle(h, creditId)).toBe('completed');
      expect((await creditView(h, creditId)).status).toBe('completed');

      expect(await wallet(h, userId)).toEqual({
        user_id: userId,
        balances: [
          { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
          { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '10.00' },
        ],
      });
      const [playerBonus] = await playerBonuses(h, userId);
      expect(playerBonus).toMatchObject({
        user_bonus_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        credit_id: creditId,
        bonus_code: bonus.code,
        type: 'WelcomeBonus',
        product: 'Casino',
        amount: '10.00',
        currency: 'EUR',
        required_wagering_amount: '350.00',
        status: 'Created',
      });
      const validity = new Date(playerBonus.expires_at).getTime() - new Date(playerBonus.created_at).getTime();
      expect(Math.abs(validity - 30 * 86400000)).toBeLessThan(60000);
      const statusUrl = `/v1/players/${userId}/bonuses/${playerBonus.user_bonus_id}/status`;

      const forfeited = await h.internal('POST', statusUrl, { status: 'Forfeited' });
      expect(forfeited.statusCode).toBe(200);
      expect(forfeited.json()).toEqual({ user_bonus_id: playerBonus.user_bonus_id, status: 'Forfeited', changed: true });
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
      expect((await playerBonuses(h, userId))[0].status).toBe('Forfeited');
      expect(await ledger(h, userId)).toHaveLength(2);
      let events = await bonusEvents(h, playerBonus.user_bonus_id);
      expect(events.map((e) => e.status)).toEqual(['Created', 'Forfeited']);
      expect(events[1].body).toMatchObject({ status: 'Forfeited', user_bonus_id: playerBonus.user_bonus_id, user_id: userId, amount: 10 });

      const again = await h.internal('POST', statusUrl, { status: 'Forfeited' });
      expect(again.statusCode).toBe(200);
      expect(again.json()).toEqual({ user_bonus_id: playerBonus.user_bonus_id, status: 'Forfeited', changed: false });
      events = await bonusEvents(h, playerBonus.user_bonus_id);
      expect(events).toHaveLength(2);

      expectError(await h.internal('POST', statusUrl, { status: 'Completed' }), 409);
      expect(await bonusEvents(h, playerBonus.user_bonus_id)).toHaveLength(2);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
    });

    it('Completed turns the bonus money into real money and reports bonus_turned_real', async () => {
      const bonus = await createBonus(h, { amount: '15.00' });
      const userId = uniqueName('player');
      const creditId = (await creditBonus(h, { user_id: userId, bonus_code: bonus.code })).json().credit_id;
      await settle(h, creditId);
      const [playerBonus] = await playerBonuses(h, userId);
      const completed = await h.internal('POST', `/v1/players/${userId}/bonuses/${playerBonus.user_bonus_id}/status`, { status: 'Completed' });
      expect(completed.json()).toEqual({ user_bonus_id: playerBonus.user_bonus_id, status: 'Completed', changed: true });
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '15.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
      const events = await bonusEvents(h, playerBonus.user_bonus_id);
      expect(events.map((e) => e.status)).toEqual(['Created', 'Completed']);
      expect(events[1].body).toMatchObject({ bonus_turned_real: 15 });
    });

    it('changes a bonus once under 10 concurrent identical status requests: one changed, one event, one ledger move', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      await settle(h, (await creditBonus(h, { user_id: userId, bonus_code: bonus.code })).json().credit_id);
      const [playerBonus] = await playerBonuses(h, userId);
      const url = `/v1/players/${userId}/bonuses/${playerBonus.user_bonus_id}/status`;
      const responses = await Promise.all(Array.from({ length: 10 }, () => h.internal('POST', url, { status: 'Forfeited' })));
      expect(responses.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
      expect(responses.filter((r) => r.json().changed)).toHaveLength(1);
      expect((await bonusEvents(h, playerBonus.user_bonus_id)).map((e) => e.status)).toEqual(['Created', 'Forfeited']);
      expect(await ledger(h, userId)).toHaveLength(2);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
    });

    it('lets exactly one of a racing Completed and Forfeited win; the other answers 409', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      await settle(h, (await creditBonus(h, { user_id: userId, bonus_code: bonus.code })).json().credit_id);
      const [playerBonus] = await playerBonuses(h, userId);
      const url = `/v1/players/${userId}/bonuses/${playerBonus.user_bonus_id}/status`;
      const [completed, forfeited] = await Promise.all([h.internal('POST', url, { status: 'Completed' }), h.internal('POST', url, { status: 'Forfeited' })]);
      expect([completed.statusCode, forfeited.statusCode].sort()).toEqual([200, 409]);
      const winner = completed.statusCode === 200 ? 'Completed' : 'Forfeited';
      expect((await bonusEvents(h, playerBonus.user_bonus_id)).map((e) => e.status)).toEqual(['Created', winner]);
      expect((await playerBonuses(h, userId))[0].status).toBe(winner);
    });

    it('expires a bonus past its validity once, however many worker rounds see it', async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      await settle(h, (await creditBonus(h, { user_id: userId, bonus_code: bonus.code })).json().credit_id);
      const [playerBonus] = await playerBonuses(h, userId);
      await h.stores.db.playerBonus.update({ where: { id: playerBonus.user_bonus_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
      await Promise.all([runBonusRound(deps(h)), runBonusRound(deps(h))]);
      await runBonusRound(deps(h));
      expect((await playerBonuses(h, userId))[0].status).toBe('Expired');
      expect((await bonusEvents(h, playerBonus.user_bonus_id)).map((e) => e.status)).toEqual(['Created', 'Expired']);
      expect((await wallet(h, userId)).balances).toEqual([
        { brand_id: 0, currency: 'EUR', key: 'real_money', amount: '0.00' },
        { brand_id: 0, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      ]);
    });

    it("answers 404 for an unknown bonus and for another player's bonus, 400 for a malformed id or status", async () => {
      const bonus = await createBonus(h);
      const userId = uniqueName('player');
      const creditId = (await creditBonus(h, { user_id: userId, bonus_code: bonus.code })).json().credit_id;
      await settle(h, creditId);
      const [playerBonus] = await playerBonuses(h, userId);

      expectError(await h.internal('POST', `/v1/players/${userId}/bonuses/${randomUUID()}/status`, { status: 'Forfeited' }), 404);
      expectError(await h.internal('POST', `/v1/players/${uniqueName('other')}/bonuses/${playerBonus.user_bonus_id}/status`, { status: 'Forfeited' }), 404);
      expectError(await h.internal('POST', `/v1/players/${userId}/bonuses/not-a-bonus-id/status`, { status: 'Forfeited' }), 400);
      expectError(await h.internal('POST', `/v1/players/${userId}/bonuses/${'-'.repeat(36)}/status`, { status: 'Forfeited' }), 400);
      expectError(await h.internal('POST', `/v1/players/${userId}/bonuses/${playerBonus.user_bonus_id}/status`, { status: 'Gone' }), 400);
      expectError(await h.internal('POST', `/v1/players/${userId}/bonuses/${playerBonus.user_bonus_id}/status`, {}), 400);
      // Nothing moved.
      expect((await playerBonuses(h, userId))[0].status).toBe('Created');
      expect(await bonusEvents(h, playerBonus.user_bonus_id)).toHaveLength(1);
    });

    it('GET /v1/credits lists by user and status, including the failed ones; GET /v1/credits/:id answers 404 for unknown ids', async () => {
      const userId = uniqueName('player');
      const response = await creditFunds(h, { user_id: userId, amount: 8, currency: 'EUR' });
      const creditId = response.json().credit_id;
      // The operator platform refuses it for good.
      expect(await processCredit(refusingDeps(h), (await getCredit(h.stores.db.pool, creditId))!)).toBe('failed');

      const failed = await h.internal('GET', '/v1/credits?status=failed');
      expect(failed.statusCode).toBe(200);
      const failedCredits = failed.json().credits as any[];
      expect(failedCredits.every((c) => c.status === 'failed')).toBe(true);
      expect(failedCredits.find((c) => c.credit_id === creditId)).toMatchObject({ status: 'failed', error: 'refused by the test platform', attempts: 1, amount: '8.00' });

      const byUser = await h.internal('GET', `/v1/credits?user_id=${userId}&status=failed`);
      expect(byUser.json().credits.map((c: { credit_id: string }) => c.credit_id)).toEqual([creditId]);
      expect((await h.internal('GET', `/v1/credits?user_id=${userId}&status=accepted`)).json().credits).toEqual([]);
      expect((await h.internal('GET', `/v1/credits?user_id=${userId}`)).json().credits).toHaveLength(1);
      expect(await wallet(h, userId)).toEqual({ user_id: userId, balances: [] });

      expectError(await h.internal('GET', '/v1/credits?status=bogus'), 400);
      expectError(await h.internal('GET', `/v1/credits/${randomUUID()}`), 404);
      expectError(await h.internal('GET', '/v1/credits/not-a-uuid'), 404);
      expect((await h.internal('GET', `/v1/credits/${creditId.toUpperCase()}`)).json().credit_id).toBe(creditId);
    });
  });
});

describe('bonus endpoints when PostgreSQL is down', () => {
  let pgProxy: TcpProxy;
  let h: Harness;

  beforeAll(async () => {
    pgProxy = await TcpProxy.forUrl(process.env.DATABASE_URL!).start();
    h = await Harness.open({ DATABASE_URL: pgProxy.urlFor(process.env.DATABASE_URL!) });
  });
  afterAll(async () => {
    await pgProxy.resume();
    await h.close();
    await pgProxy.stop();
  });
  beforeEach(async () => {
    await pgProxy.resume();
  });

  it('GET /bonus/list still answers 200 with {Data: [], Success: false, Errors: [message]}, and recovers', async () => {
    const bonus = await createBonus(h);
    await pgProxy.stop();
    const response = await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': OPERATOR_KEY } });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(Object.keys(body)).toEqual(['Data', 'Success', 'Errors']);
    expect(body).toEqual({ Data: [], Success: false, Errors: [expect.any(String)] });
    expect(body.Errors[0].length).toBeGreaterThan(0);

    await pgProxy.resume();
    const back = await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': OPERATOR_KEY } });
    expect(back.json().Success).toBe(true);
    expect(back.json().Data).toContainEqual({ text: bonus.label, value: bonus.code });
  });

  it('POST /bonus/credit and /bonus/credit/funds answer 503 {error} with Retry-After, and the retry is accepted once', async () => {
    const bonus = await createBonus(h);
    const userId = uniqueName('player');
    const bonusHeaders = crmHeaders();
    const fundsHeaders = crmHeaders();
    await pgProxy.stop();

    for (const response of [
      await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, bonusHeaders),
      await creditFunds(h, { user_id: userId, amount: 5, currency: 'EUR' }, fundsHeaders),
    ]) {
      expect(response.statusCode).toBe(503);
      expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      expect(response.headers['retry-after']).toBeDefined();
    }
    expect((await h.internal('GET', `/v1/players/${userId}/wallet`)).statusCode).toBe(503);
    expect((await h.internal('GET', '/v1/bonuses')).statusCode).toBe(503);

    await pgProxy.resume();
    // The CRM retries after a 5xx: the retry is the first and only credit.
    const bonusRetry = await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, bonusHeaders);
    const fundsRetry = await creditFunds(h, { user_id: userId, amount: 5, currency: 'EUR' }, fundsHeaders);
    expect(bonusRetry.statusCode).toBe(200);
    expect(fundsRetry.statusCode).toBe(200);
    expect((await creditBonus(h, { user_id: userId, bonus_code: bonus.code }, bonusHeaders)).json().credit_id).toBe(bonusRetry.json().credit_id);
    expect(await h.stores.db.credit.count({ where: { userId } })).toBe(2);
  });

  it('still answers 400 to a request that is wrong whatever the database says', async () => {
    await pgProxy.stop();
    expectError(await creditBonus(h, { user_id: 'p' }), 400);
    expectError(await creditFunds(h, { user_id: 'p', amount: 0, currency: 'EUR' }), 400);
    expectError(await creditBonus(h, '{"user_id":'), 400);
  });
});

describe('bonus endpoints per brand', () => {
  // K_ALL opens every brand, K1 brand 1, K2 brand 2, K12 brands 1 and 2 (not BONUS_DEFAULT_BRAND, 0).
  const KEYS = { all: 'k-all-bonus-brands', one: 'k-one-bonus-brands', two: 'k-two-bonus-brands', both: 'k-both-bonus-brands' };
  const ADMIN = { all: 'a-all-bonus-brands', one: 'a-one-bonus-brands' };
  const env = (defaultBrand: string) => ({
    OPERATOR_API_KEYS: `${KEYS.all},${KEYS.one}@1,${KEYS.two}@2,${KEYS.both}@1+2`,
    INTERNAL_ADMIN_KEYS: `${ADMIN.all},${ADMIN.one}@1`,
    BONUS_DEFAULT_BRAND: defaultBrand,
  });
  let h: Harness;

  beforeAll(async () => {
    h = await Harness.open(env('0'));
  });
  afterAll(async () => {
    await h.close();
  });

  const as = (key: string, headers: Record<string, string> = crmHeaders()) => ({ ...headers, 'x-api-key': key });
  const admin = (key: string, method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) =>
    h.app.inject({ method, url, headers: { 'x-api-key': key, 'content-type': 'application/json' }, payload: body === undefined ? undefined : JSON.stringify(body) });
  const brandOf = async (creditId: string) => (await admin(ADMIN.all, 'GET', `/v1/credits/${creditId}`)).json().brand_id;

  it('makes the same X-Service-Id sent with K1 and with K2 (funds for the same player id) two credits, completed into two wallets', async () => {
    const userId = uniqueName('player');
    const headers = crmHeaders();
    const first = await creditFunds(h, { user_id: userId, amount: 25.5, currency: 'EUR' }, as(KEYS.one, headers));
    const second = await creditFunds(h, { user_id: userId, amount: 4, currency: 'EUR' }, as(KEYS.two, headers));
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
    const [one, two] = [first.json().credit_id, second.json().credit_id];
    expect(two).not.toBe(one);
    // A retry with K1 is brand 1's credit again.
    expect((await creditFunds(h, { user_id: userId, amount: 25.5, currency: 'EUR' }, as(KEYS.one, headers))).json()).toEqual({ credit_id: one, status: 'accepted' });

    expect(await settle(h, one)).toBe('completed');
    expect(await settle(h, two)).toBe('completed');
    expect([await brandOf(one), await brandOf(two)]).toEqual([1, 2]);
    const balances = (await admin(ADMIN.all, 'GET', `/v1/players/${userId}/wallet`)).json().balances;
    expect(balances).toEqual([
      { brand_id: 1, currency: 'EUR', key: 'real_money', amount: '25.50' },
      { brand_id: 1, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
      { brand_id: 2, currency: 'EUR', key: 'real_money', amount: '4.00' },
      { brand_id: 2, currency: 'EUR', key: 'bonus_money', amount: '0.00' },
    ]);
    // Each wallet's balance event is its brand's, under a key of its own (the two may be written in either order).
    const balanceEvents = await h.stores.db.event.findMany({ where: { topic: 'balance', orderingKey: { in: [`balance:1:${userId}`, `balance:2:${userId}`] } } });
    expect(balanceEvents.map((e) => `${e.orderingKey} ${e.brandId}`).sort()).toEqual([`balance:1:${userId} 1`, `balance:2:${userId} 2`]);

    // An admin key of brand 1 sees brand 1's wallet, entries and credit only.
    expect((await admin(ADMIN.one, 'GET', `/v1/players/${userId}/wallet`)).json().balances).toEqual(balances.slice(0, 2));
    expect((await admin(ADMIN.one, 'GET', `/v1/players/${userId}/ledger`)).json().entries).toEqual([expect.objectContaining({ brand_id: 1, amount: '25.50' })]);
    expect((await admin(ADMIN.one, 'GET', `/v1/credits?user_id=${userId}`)).json().credits.map((c: { credit_id: string }) => c.credit_id)).toEqual([one]);
    expect((await admin(ADMIN.one, 'GET', `/v1/credits/${two}`)).statusCode).toBe(404);
  });

  it('credits BONUS_DEFAULT_BRAND for a key of every brand, and refuses 403 a key of brands 1 and 2 without it', async () => {
    const userId = uniqueName('player');
    const funds = { user_id: userId, amount: 1, currency: 'EUR' };
    const credited = await creditFunds(h, funds, as(KEYS.all));
    expect(credited.statusCode).toBe(200);
    expect(await brandOf(credited.json().credit_id)).toBe(0);

    const { code } = await createBonus(h);
    for (const response of [
      await creditFunds(h, funds, as(KEYS.both)),
      await creditBonus(h, { user_id: userId, bonus_code: code }, as(KEYS.both)),
      await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': KEYS.both } }),
    ]) {
      expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 403, body: { error: expect.stringContaining('BONUS_DEFAULT_BRAND'), code: 403 } });
    }
    expect((await admin(ADMIN.all, 'GET', `/v1/credits?user_id=${userId}`)).json().credits).toHaveLength(1);

    // With BONUS_DEFAULT_BRAND=2 the same keys credit brand 2.
    const other = await Harness.open(env('2'));
    try {
      for (const key of [KEYS.all, KEYS.both]) {
        const response = await creditFunds(other, funds, as(key));
        expect(response.statusCode).toBe(200);
        expect(await brandOf(response.json().credit_id)).toBe(2);
      }
    } finally {
      await other.close();
    }
  });

  it("offers each brand the catalog's entries for every brand and its own; another brand's code is unknown", async () => {
    const [everyBrand, brandOne, brandTwo] = [uniqueName('all'), uniqueName('one'), uniqueName('two')];
    expect((await admin(ADMIN.all, 'PUT', `/v1/bonuses/${everyBrand}`, bonusBody())).statusCode).toBe(201);
    expect((await admin(ADMIN.one, 'PUT', `/v1/bonuses/${brandOne}`, bonusBody({ brand_id: 1 }))).statusCode).toBe(201);
    expect((await admin(ADMIN.all, 'PUT', `/v1/bonuses/${brandTwo}`, bonusBody({ brand_id: 2 }))).statusCode).toBe(201);
    // A key of brand 1 makes entries of brand 1 only, and changes none of another brand's or every brand's.
    expectError(await admin(ADMIN.one, 'PUT', `/v1/bonuses/${uniqueName('x')}`, bonusBody()), 403);
    expectError(await admin(ADMIN.one, 'PUT', `/v1/bonuses/${uniqueName('x')}`, bonusBody({ brand_id: 2 })), 403);
    expectError(await admin(ADMIN.one, 'PUT', `/v1/bonuses/${brandTwo}`, bonusBody({ brand_id: 1 })), 409);
    expectError(await admin(ADMIN.one, 'PUT', `/v1/bonuses/${everyBrand}`, bonusBody({ brand_id: 1 })), 409);

    const ours = (codes: string[]) => codes.filter((code) => [everyBrand, brandOne, brandTwo].includes(code)).sort();
    const listed = async (key: string) => ours((await h.app.inject({ method: 'GET', url: '/bonus/list', headers: { 'x-api-key': key } })).json().Data.map((d: { value: string }) => d.value));
    expect(await listed(KEYS.one)).toEqual([everyBrand, brandOne].sort());
    expect(await listed(KEYS.two)).toEqual([everyBrand, brandTwo].sort());
    expect(await listed(KEYS.all)).toEqual([everyBrand]);
    expect(ours((await admin(ADMIN.one, 'GET', '/v1/bonuses')).json().bonuses.map((b: { code: string }) => b.code))).toEqual([everyBrand, brandOne].sort());

    const userId = uniqueName('player');
    const refused = await creditBonus(h, { user_id: userId, bonus_code: brandTwo }, as(KEYS.one));
    expect({ status: refused.statusCode, body: refused.json() }).toEqual({ status: 404, body: { error: `unknown bonus code ${brandTwo}`, code: 404 } });
    const credited = await creditBonus(h, { user_id: userId, bonus_code: brandTwo }, as(KEYS.two));
    expect(credited.statusCode).toBe(200);
    expect(await settle(h, credited.json().credit_id)).toBe('completed');

    // The player's bonus and its event are brand 2's; an admin key of brand 1 neither sees nor moves it.
    const [bonus] = (await admin(ADMIN.all, 'GET', `/v1/players/${userId}/bonuses`)).json().bonuses;
    expect(bonus).toMatchObject({ brand_id: 2, bonus_code: brandTwo });
    expect((await bonusEvents(h, bonus.user_bonus_id)).map((e) => e.brandId)).toEqual([2n]);
    expect((await admin(ADMIN.one, 'GET', `/v1/players/${userId}/bonuses`)).json().bonuses).toEqual([]);
    expect((await admin(ADMIN.one, 'POST', `/v1/players/${userId}/bonuses/${bonus.user_bonus_id}/status`, { status: 'Forfeited' })).statusCode).toBe(404);
    expect((await admin(ADMIN.all, 'POST', `/v1/players/${userId}/bonuses/${bonus.user_bonus_id}/status`, { status: 'Forfeited' })).statusCode).toBe(200);
  });
});
