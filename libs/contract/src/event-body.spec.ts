import { pushEventBody, type PushEventSource } from './event-body';

const row = (overrides: Partial<PushEventSource> = {}): PushEventSource => ({
  id: '0b7e4c1e-2f0a-4c55-9d6e-1b2c3d4e5f60',
  pushId: '01932c8e-7a10-7c3b-8f00-123456789abc',
  status: 'delivered',
  error: null,
  occurredAt: new Date('2026-11-22T02:47:00.410Z'),
  meta: '{ "campaign" : "spring",  "n": 1.0, "big": 12345678901234567890, "u": "\\u00e9" }',
  crmMessageId: '140737488355327',
  brandId: '17',
  userId: 'player-1',
  activityId: '71',
  actionGroupId: '72',
  actionId: '73',
  triggerHash: 'trigger-abc',
  ...overrides,
});

const ACTIVITY =
  '"activity":{"id":140737488355327,"brand_id":17,"user_id":"player-1","activity_id":71,"action_group_id":72,"action_id":73,"trigger_hash":"trigger-abc"}';

describe('pushEventBody', () => {
  it('is the event with the activity ids, and the meta spliced in as the CRM wrote it', () => {
    expect(pushEventBody(row())).toBe(
      '{"event_id":"0b7e4c1e-2f0a-4c55-9d6e-1b2c3d4e5f60","push_id":"01932c8e-7a10-7c3b-8f00-123456789abc","status":"delivered",' +
        `"timestamp":"2026-11-22T02:47:00.410Z",${ACTIVITY},` +
        '"meta":{ "campaign" : "spring",  "n": 1.0, "big": 12345678901234567890, "u": "\\u00e9" }}',
    );
  });

  it('is valid JSON whose meta is the CRM’s (the big number as JSON reads it)', () => {
    const parsed = JSON.parse(pushEventBody(row()));
    expect(parsed.meta).toEqual({ campaign: 'spring', n: 1, big: 12345678901234567890, u: 'é' });
    expect(Object.keys(parsed)).toEqual(['event_id', 'push_id', 'status', 'timestamp', 'activity', 'meta']);
  });

  it('carries {} when the push was sent without meta', () => {
    expect(pushEventBody(row({ meta: null }))).toBe(
      '{"event_id":"0b7e4c1e-2f0a-4c55-9d6e-1b2c3d4e5f60","push_id":"01932c8e-7a10-7c3b-8f00-123456789abc","status":"delivered",' +
        `"timestamp":"2026-11-22T02:47:00.410Z",${ACTIVITY},"meta":{}}`,
    );
  });

  it('carries the error only when there is one', () => {
    expect(pushEventBody(row({ status: 'failed', error: 'payload-too-large, unregistered', meta: '{"k":[1,2]}' }))).toBe(
      '{"event_id":"0b7e4c1e-2f0a-4c55-9d6e-1b2c3d4e5f60","push_id":"01932c8e-7a10-7c3b-8f00-123456789abc","status":"failed",' +
        `"timestamp":"2026-11-22T02:47:00.410Z",${ACTIVITY},"error":"payload-too-large, unregistered","meta":{"k":[1,2]}}`,
    );
    expect(JSON.parse(pushEventBody(row({ error: null })))).not.toHaveProperty('error');
    expect(JSON.parse(pushEventBody(row({ error: '' })))).not.toHaveProperty('error');
  });

  it('escapes text fields as JSON', () => {
    const body = pushEventBody(row({ userId: 'pl"ay\\er', triggerHash: 'line\nbreak', error: 'bad "thing"' }));
    const parsed = JSON.parse(body);
    expect(parsed.activity).toMatchObject({ user_id: 'pl"ay\\er', trigger_hash: 'line\nbreak' });
    expect(parsed.error).toBe('bad "thing"');
  });

  it('writes the timestamp as RFC 3339 UTC with milliseconds', () => {
    const parsed = JSON.parse(pushEventBody(row({ occurredAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)) })));
    expect(parsed.timestamp).toBe('2026-01-02T03:04:05.006Z');
  });
});
