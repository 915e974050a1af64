import { createHash } from 'node:crypto';
import { MAX_AMOUNT_MINOR } from '@operator/contract';
import type { BonusRow } from '@operator/db';
import { canonicalJson, isText, prepareBonusCredit, prepareFundsCredit, tupleKey } from './credit';

const headers = { id: 'svc-1', activity_id: '55', action_id: '3', trigger_hash: 'th-1' };

describe('tupleKey', () => {
  it('is the SHA-256 (hex) of activity, action, player and trigger hash, whatever their size', () => {
    const json = JSON.stringify(['55', '3', 'p-1', 'th-1']);
    expect(tupleKey(headers, 'p-1')).toBe(createHash('sha256').update(json).digest('hex'));
    expect(tupleKey({ ...headers, trigger_hash: '\u00e9'.repeat(5000) }, 'p-1')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('differs when any of the four differs, and is null when a header is missing', () => {
    const keys = new Set([
      tupleKey(headers, 'p-1'),
      tupleKey(headers, 'p-2'),
      tupleKey({ ...headers, activity_id: '56' }, 'p-1'),
      tupleKey({ ...headers, action_id: '4' }, 'p-1'),
      tupleKey({ ...headers, trigger_hash: 'th-2' }, 'p-1'),
    ]);
    expect(keys.size).toBe(5);
    expect(tupleKey({ ...headers, trigger_hash: undefined }, 'p-1')).toBeNull();
  });
});

describe('isText', () => {
  it('refuses NUL and unpaired surrogates', () => {
    expect(isText('p-1')).toBe(true);
    expect(isText('p\u0000')).toBe(false);
    expect(isText('p\udc00')).toBe(false);
  });
});

describe('prepareBonusCredit', () => {
  const bonus: BonusRow = { code: 'BIG', label: 'Big', type: 'WelcomeBonus', product: 'Casino', amountMinor: 1000n, currency: 'EUR', validityDays: 30, wageringRequirement: '35.00', active: true, brandId: null };
  const input = (body: Record<string, unknown>) => ({ body, text: JSON.stringify(body), rawAmount: undefined, headers, idempotencyKey: 'svc-1', brandId: '0' });

  it('refuses with 422 a catalog bonus over the bounds (stored before them), rather than accepting a credit the ledger cannot carry', () => {
    expect(prepareBonusCredit(input({ user_id: 'p', bonus_code: 'BIG' }), { ...bonus, amountMinor: MAX_AMOUNT_MINOR + 1n })).toMatchObject({ ok: false, status: 422 });
    expect(prepareBonusCredit(input({ user_id: 'p', bonus_code: 'BIG' }), { ...bonus, wageringRequirement: '10000.01' })).toMatchObject({ ok: false, status: 422 });
    expect(prepareBonusCredit(input({ user_id: 'p', bonus_code: 'BIG' }), { ...bonus, amountMinor: MAX_AMOUNT_MINOR, wageringRequirement: '10000.00' })).toMatchObject({ ok: true });
  });
});

describe('request fingerprints', () => {
  const bonus: BonusRow = { code: 'W10', label: 'W10', type: 'WelcomeBonus', product: 'Casino', amountMinor: 1000n, currency: 'EUR', validityDays: 30, wageringRequirement: '35.00', active: true, brandId: null };
  const input = (text: string) => {
    const body = JSON.parse(text) as Record<string, unknown>;
    const raw = /"amount"\s*:\s*(-?[0-9.]+)/.exec(text)?.[1];
    return { body, text, rawAmount: raw, headers, idempotencyKey: 'svc-1', brandId: '0' };
  };
  const funds = (text: string) => {
    const prepared = prepareFundsCredit(input(text));
    if (!prepared.ok) throw new Error(prepared.error);
    return prepared.credit.fingerprint;
  };

  it('sorts keys at every depth, and leaves arrays in their order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { f: 1, e: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[3,{"e":2,"f":1}]},"b":1}');
  });

  it('is the same for a body spaced and ordered otherwise, with the amount written otherwise', () => {
    const first = funds('{"user_id":"mm-1","amount":5,"currency":"EUR","campaign":{"brand_id":7,"tags":["a","b"]}}');
    expect(funds(' { "currency" : "EUR", "campaign": {"tags": ["a","b"], "brand_id": 7}, "amount": "5.00", "user_id": "mm-1" } ')).toBe(first);
    expect(funds('{"user_id":"mm-1","amount":5.0,"currency":"EUR","campaign":{"brand_id":7,"tags":["a","b"]}}')).toBe(first);
  });

  it('differs for another player, amount, currency, brand, field or endpoint', () => {
    const base = { user_id: 'mm-1', amount: '5.00', currency: 'EUR', bonus_code: 'W10', brand_id: 7 };
    const fingerprints = [
      funds(JSON.stringify(base)),
      funds(JSON.stringify({ ...base, user_id: 'mm-2' })),
      funds(JSON.stringify({ ...base, amount: '250.00' })),
      funds(JSON.stringify({ ...base, amount: '5.01' })),
      funds(JSON.stringify({ ...base, currency: 'USD' })),
      funds(JSON.stringify({ ...base, brand_id: 8 })),
      funds(JSON.stringify({ ...base, bonus_code: 'W11' })),
      funds(JSON.stringify({ ...base, type: 'wheel' })),
    ];
    const asBonus = prepareBonusCredit(input(JSON.stringify(base)), bonus);
    if (!asBonus.ok) throw new Error(asBonus.error);
    fingerprints.push(asBonus.credit.fingerprint);
    expect(new Set(fingerprints).size).toBe(fingerprints.length);
  });

  it('takes a catalog bonus by what the request names, not by the catalog amount it resolves to', () => {
    const text = '{"user_id":"mm-1","bonus_code":"W10"}';
    const now = prepareBonusCredit(input(text), bonus);
    const later = prepareBonusCredit(input(text), { ...bonus, amountMinor: 2000n });
    expect(now.ok && later.ok && now.credit.fingerprint === later.credit.fingerprint).toBe(true);
  });
});
