import type { AccountRow, PlayerBonusRow } from '@operator/db';
import { BONUS_PRODUCTS, BONUS_STATUSES, BONUS_TYPES } from './catalog';
import { balanceEventBody, bonusEventBody, references, type EventSettings } from './events';

const settings: EventSettings = { headerWord: 'Service', origin: 'operator', exchangeRates: { USD: 0.92 } };

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function playerBonus(overrides: Partial<PlayerBonusRow> = {}): PlayerBonusRow {
  return {
    id: '0b9f6c52-3a2e-4c1f-9d7e-6a1b2c3d4e5f',
    creditId: '5d2c1b0a-9e8f-4a7b-8c6d-5e4f3a2b1c0d',
    brandId: '7',
    userId: 'player-42',
    bonusCode: 'WELCOME10',
    type: 'WelcomeBonus',
    product: 'Casino',
    amountMinor: 1050n,
    currency: 'EUR',
    requiredWageringMinor: 36750n,
    status: 'Created',
    expiresAt: new Date('2030-01-01T00:00:00Z'),
    createdAt: new Date('2026-01-01T00:00:00Z'),
    updatedAt: new Date('2026-01-01T00:00:00Z'),
    ...overrides,
  };
}

const headers = {
  id: '812345',
  activity_id: '1001',
  action_id: '2002',
  action_group_id: '3003',
  action_communication_profile_id: '4004',
  trigger_hash: '0123456789',
};

describe('bonusEventBody', () => {
  const at = new Date('2026-03-04T05:06:07.089Z');
  const text = bonusEventBody(playerBonus(), 'Created', { crmHeaders: headers }, settings, { at });
  const body = JSON.parse(text);

  it('carries every required field with its JSON type', () => {
    expect(typeof body.amount).toBe('number');
    expect(body.amount).toBe(10.5);
    expect(typeof body.bonus_id).toBe('string');
    expect(body.bonus_id).toBe('WELCOME10');
    expect(body.currency).toBe('EUR');
    expect(typeof body.exchange_rate).toBe('number');
    expect(body.exchange_rate).toBe(1);
    expect(body.origin).toBe('operator');
    expect(body.user_bonus_id).toBe('0b9f6c52-3a2e-4c1f-9d7e-6a1b2c3d4e5f');
    expect(body.user_id).toBe('player-42');
    expect(body.product).toBe('Casino');
    expect(body.status).toBe('Created');
    expect(body.type).toBe('WelcomeBonus');
    expect(body.timestamp).toBe('2026-03-04T05:06:07.089Z');
    expect(body.timestamp).toMatch(RFC3339);
    for (const field of ['bonus_id', 'currency', 'origin', 'user_bonus_id', 'user_id', 'product', 'status', 'timestamp', 'type']) {
      expect(typeof body[field]).toBe('string');
    }
    expect(BONUS_PRODUCTS).toContain(body.product);
    expect(BONUS_STATUSES).toContain(body.status);
    expect(BONUS_TYPES).toContain(body.type);
  });

  it('writes amounts digit for digit as JSON numbers (no binary float on the way)', () => {
    expect(text).toContain('"amount":10.50');
    expect(text).toContain('"required_wagering_amount":367.50');
    const big = bonusEventBody(playerBonus({ amountMinor: 12345678901234567n, requiredWageringMinor: 1n }), 'Created', { crmHeaders: {} }, settings);
    expect(big).toContain('"amount":123456789012345.67');
    expect(big).toContain('"required_wagering_amount":0.01');
    const yen = bonusEventBody(playerBonus({ amountMinor: 500n, currency: 'JPY', requiredWageringMinor: 0n }), 'Created', { crmHeaders: {} }, settings);
    expect(yen).toContain('"amount":500,');
    expect(yen).toContain('"required_wagering_amount":0,');
    const dinar = bonusEventBody(playerBonus({ amountMinor: 1234n, currency: 'BHD' }), 'Created', { crmHeaders: {} }, settings);
    expect(dinar).toContain('"amount":1.234,');
    expect(JSON.parse(dinar).amount).toBe(1.234);
  });

  it('uses the configured exchange rate of the currency, 1 when it is not listed', () => {
    const usd = JSON.parse(bonusEventBody(playerBonus({ brandId: '7', currency: 'USD' }), 'Created', { crmHeaders: {} }, settings));
    expect(usd.exchange_rate).toBe(0.92);
    const gbp = JSON.parse(bonusEventBody(playerBonus({ brandId: '7', currency: 'GBP' }), 'Created', { crmHeaders: {} }, settings));
    expect(gbp.exchange_rate).toBe(1);
  });

  it('sets the timestamp to now when none is given', () => {
    const before = Date.now();
    const now = JSON.parse(bonusEventBody(playerBonus(), 'Created', { crmHeaders: {} }, settings));
    expect(now.timestamp).toMatch(RFC3339);
    expect(Date.parse(now.timestamp)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(now.timestamp)).toBeLessThanOrEqual(Date.now());
  });

  it('has the optional bonus_code (a string) and required_wagering_amount (a number); bonus_turned_real only when given', () => {
    expect(body.bonus_code).toBe('WELCOME10');
    expect(typeof body.required_wagering_amount).toBe('number');
    expect(body.required_wagering_amount).toBe(367.5);
    expect(body).not.toHaveProperty('bonus_turned_real');
    expect(text).not.toContain('bonus_turned_real');

    const completedText = bonusEventBody(playerBonus(), 'Completed', { crmHeaders: headers }, settings, { bonusTurnedReal: 1050n });
    expect(completedText).toContain('"bonus_turned_real":10.50');
    const completed = JSON.parse(completedText);
    expect(completed.status).toBe('Completed');
    expect(typeof completed.bonus_turned_real).toBe('number');
    expect(completed.bonus_turned_real).toBe(10.5);

    expect(JSON.parse(bonusEventBody(playerBonus(), 'Completed', { crmHeaders: {} }, settings, { bonusTurnedReal: 0n })).bonus_turned_real).toBe(0);
  });

  it('carries the request headers as service_references: ids as integers, id and trigger_hash as strings', () => {
    expect(body.service_references).toEqual({
      id: '812345',
      activity_id: 1001,
      action_id: 2002,
      action_group_id: 3003,
      action_communication_profile_id: 4004,
      trigger_hash: '0123456789',
    });
    expect(text).toContain('"id":"812345"');
    expect(text).toContain('"trigger_hash":"0123456789"');
    expect(text).toContain('"action_id":2002');
  });

  it('has only the fields of the facts file', () => {
    const allowed = [
      'amount',
      'bonus_id',
      'currency',
      'exchange_rate',
      'origin',
      'user_bonus_id',
      'user_id',
      'product',
      'status',
      'timestamp',
      'type',
      'bonus_code',
      'bonus_turned_real',
      'locked_amount',
      'required_wagering_amount',
      'meta',
      'service_references',
    ];
    for (const field of Object.keys(body)) expect(allowed).toContain(field);
  });

  it('names the references object after the configured header word', () => {
    const acme = JSON.parse(bonusEventBody(playerBonus(), 'Created', { crmHeaders: headers }, { ...settings, headerWord: 'Acme' }));
    expect(acme).toHaveProperty('acme_references');
    expect(acme).not.toHaveProperty('service_references');
    expect(acme.acme_references.action_id).toBe(2002);
  });

  it('gives an empty references object when the request had no CRM headers', () => {
    expect(JSON.parse(bonusEventBody(playerBonus(), 'Created', { crmHeaders: {} }, settings)).service_references).toEqual({});
  });
});

describe('references', () => {
  it('turns numeric ids into integers and keeps id, trigger_hash and non-numeric values as sent', () => {
    expect(references({ id: '42', trigger_hash: '42', action_id: '7', activity_id: 'not-a-number', action_group_id: '-3' })).toEqual({
      id: '42',
      trigger_hash: '42',
      action_id: 7,
      activity_id: 'not-a-number',
      action_group_id: '-3',
    });
  });

  it('keeps ids too large for an exact JSON number as text', () => {
    expect(references({ action_id: '1234567890123456789' })).toEqual({ action_id: '1234567890123456789' });
    expect(references({ action_id: '999999999999999' })).toEqual({ action_id: 999999999999999 });
  });
});

describe('balanceEventBody', () => {
  const at = new Date('2026-03-04T05:06:07.089Z');
  const accounts: AccountRow[] = [
    { brandId: '7', currency: 'EUR', kind: 'bonus_money', balanceMinor: 1050n },
    { brandId: '7', currency: 'EUR', kind: 'real_money', balanceMinor: 20000n },
    { brandId: '7', currency: 'USD', kind: 'real_money', balanceMinor: 999n },
  ];

  it('reports real and bonus money of the currency, with origin, timestamp and user id', () => {
    const text = balanceEventBody('player-42', 'EUR', accounts, settings, at);
    expect(JSON.parse(text)).toEqual({
      balances: [
        { amount: 200, currency: 'EUR', key: 'real_money', exchange_rate: 1 },
        { amount: 10.5, currency: 'EUR', key: 'bonus_money', exchange_rate: 1 },
      ],
      origin: 'operator',
      timestamp: '2026-03-04T05:06:07.089Z',
      user_id: 'player-42',
    });
    expect(text).toContain('"amount":200.00');
    expect(text).toContain('"amount":10.50');
  });

  it('has both keys even when an account is missing (0.00)', () => {
    const text = balanceEventBody('player-42', 'GBP', accounts, settings, at);
    const body = JSON.parse(text);
    expect(body.balances.map((b: { key: string }) => b.key)).toEqual(['real_money', 'bonus_money']);
    expect(body.balances.every((b: { amount: unknown; currency: string }) => b.amount === 0 && b.currency === 'GBP')).toBe(true);
    expect(text.match(/"amount":0\.00/g)).toHaveLength(2);

    const onlyReal = JSON.parse(balanceEventBody('player-42', 'USD', accounts, settings, at));
    expect(onlyReal.balances).toEqual([
      { amount: 9.99, currency: 'USD', key: 'real_money', exchange_rate: 0.92 },
      { amount: 0, currency: 'USD', key: 'bonus_money', exchange_rate: 0.92 },
    ]);
  });

  it('writes yen without decimals and the timestamp as RFC 3339 now by default', () => {
    const text = balanceEventBody('p', 'JPY', [{ brandId: '7', currency: 'JPY', kind: 'real_money', balanceMinor: 500n }], settings);
    expect(text).toContain('"amount":500,');
    expect(text).toContain('"amount":0,');
    expect(JSON.parse(text).timestamp).toMatch(RFC3339);
  });
});
