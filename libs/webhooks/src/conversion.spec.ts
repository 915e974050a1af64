import type { PushEventRow } from '@operator/db';
import { pushEventBody } from '@operator/contract';
import { conversionAction, conversionBody, statusWebhookBody } from './conversion';

const row = (status: string, meta: string | null): PushEventRow => ({
  id: '019a8f6e-0000-7000-8000-000000000001',
  feedSeq: '1',
  pushId: '019a8f6e-0000-7000-8000-000000000002',
  status,
  error: null,
  occurredAt: new Date('2026-11-22T09:15:02.310Z'),
  meta,
  crmMessageId: '1001',
  brandId: '7',
  userId: 'p-1',
  activityId: '55',
  actionGroupId: '2',
  actionId: '3',
  triggerHash: 'th-1',
});

describe('conversionAction', () => {
  it.each([
    ['accepted', undefined, undefined],
    ['sent', 'delivered', undefined],
    ['failed', undefined, undefined],
    ['delivered', undefined, 'delivered'],
    ['opened', 'read', 'read'],
    ['clicked', 'clicked', 'clicked'],
  ])('maps %s to %s when delivered on the provider, %s when delivered on the device', (status, provider, device) => {
    expect(conversionAction(status, 'provider')).toBe(provider);
    expect(conversionAction(status, 'device')).toBe(device);
  });
});

describe('conversionBody', () => {
  it('splices the meta in as written, and carries {} for a push without meta', () => {
    const meta = '{ "n": 1.0, "big": 12345678901234567890, "u": "\\u00e9" }';
    expect(conversionBody('read', meta)).toBe(`{"action":"read","metadata":${meta}}`);
    expect(JSON.parse(conversionBody('clicked', null))).toEqual({ action: 'clicked', metadata: {} });
  });
});

describe('statusWebhookBody', () => {
  it('is the event body in the event format, for every status', () => {
    for (const status of ['sent', 'failed', 'delivered', 'opened', 'clicked']) {
      expect(statusWebhookBody({ format: 'event' }, row(status, '{"a":1}'))).toBe(pushEventBody(row(status, '{"a":1}')));
    }
  });

  it('is the conversion in the conversion format, and null for a status the CRM does not count', () => {
    const format = { format: 'conversion', deliveredOn: 'provider' } as const;
    expect(statusWebhookBody(format, row('sent', '{"a":1}'))).toBe('{"action":"delivered","metadata":{"a":1}}');
    expect(statusWebhookBody(format, row('delivered', '{"a":1}'))).toBeNull();
    expect(statusWebhookBody(format, row('failed', '{"a":1}'))).toBeNull();
    expect(statusWebhookBody({ format: 'conversion', deliveredOn: 'device' }, row('delivered', null))).toBe('{"action":"delivered","metadata":{}}');
  });
});
