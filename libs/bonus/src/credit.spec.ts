import { createHash } from 'node:crypto';
import { MAX_AMOUNT_MINOR } from '@operator/contract';
import type { BonusRow } from '@operator/db';
import { isText, prepareBonusCredit, tupleKey } from './credit';

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
  const bonus: BonusRow = { code: 'BIG', label: 'Big', type: 'WelcomeBonus', product: 'Casino', amountMinor: 1000n, currency: 'EUR', validityDays: 30, wageringRequirement: '35.00', active: true };
  const input = (body: Record<string, unknown>) => ({ body, text: JSON.stringify(body), rawAmount: undefined, headers, idempotencyKey: 'svc-1' });

  it('refuses with 422 a catalog bonus over the bounds (stored before them), rather than accepting a credit the ledger cannot carry', () => {
    expect(prepareBonusCredit(input({ user_id: 'p', bonus_code: 'BIG' }), { ...bonus, amountMinor: MAX_AMOUNT_MINOR + 1n })).toMatchObject({ ok: false, status: 422 });
    expect(prepareBonusCredit(input({ user_id: 'p', bonus_code: 'BIG' }), { ...bonus, wageringRequirement: '10000.01' })).toMatchObject({ ok: false, status: 422 });
    expect(prepareBonusCredit(input({ user_id: 'p', bonus_code: 'BIG' }), { ...bonus, amountMinor: MAX_AMOUNT_MINOR, wageringRequirement: '10000.00' })).toMatchObject({ ok: true });
  });
});
