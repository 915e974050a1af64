import { COMPLIANCE_CHANNEL } from '@operator/compliance';
import { redisUrlConnection } from '@operator/config';
import { createWorkerRedis, type RedisClient } from '@operator/queue';
import { ADMIN_KEY, DEVICE_KEY, OPERATOR_KEY, uniqueName, until } from '@operator/testing';
import { Harness, openBehindProxies } from './test/harness';

// POST /v1/compliance/events takes the CRM's USER_BLOCK_V2 / USER_CONSENTS_V2 bodies and announces
// their players on COMPLIANCE_CHANNEL, where every push worker drops its cached answers for them.

describe('POST /v1/compliance/events', () => {
  let h: Harness;
  let subscriber: RedisClient;
  const heard: string[][] = [];

  beforeAll(async () => {
    h = await Harness.open();
    subscriber = createWorkerRedis(redisUrlConnection(process.env.REDIS_URL!));
    subscriber.on('message', (channel: string, message: string) => {
      if (channel === COMPLIANCE_CHANNEL) heard.push(JSON.parse(message));
    });
    await subscriber.subscribe(COMPLIANCE_CHANNEL);
  });
  afterAll(async () => {
    subscriber.disconnect();
    await h.close();
  });

  const post = (body: unknown, key: string | null = ADMIN_KEY) =>
    h.app.inject({
      method: 'POST',
      url: '/v1/compliance/events',
      headers: { 'content-type': 'application/json', ...(key === null ? {} : { 'x-api-key': key }) },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const event = (userId = uniqueName('player')) => ({ user_id: userId, timestamp: '2026-11-27T10:00:00Z', origin: 'casino' });
  const heardOf = (userId: string) => heard.filter((ids) => ids.includes(userId));

  it('announces the player of one USER_BLOCK_V2 body to the subscribers, answering 202 {players: 1}', async () => {
    const body = event();
    const response = await post(body);
    expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 202, body: { players: 1 } });
    await until(() => heardOf(body.user_id).length > 0, 'the subscriber to hear the player');
    expect(heardOf(body.user_id)).toEqual([[body.user_id]]);
  });

  it('announces the distinct players of an array in one message, keeping fields the CRM adds', async () => {
    const [a, b] = [uniqueName('player'), uniqueName('player')];
    const response = await post([event(a), { ...event(b), type: 'USER_CONSENTS_V2' }, event(a)]);
    expect({ status: response.statusCode, body: response.json() }).toEqual({ status: 202, body: { players: 2 } });
    await until(() => heardOf(a).length > 0, 'the subscriber to hear the players');
    expect(heardOf(a)).toEqual([[a, b]]);
  });

  it.each([
    ['no user_id', { timestamp: '2026-11-27T10:00:00Z', origin: 'x' }, /user_id is required/],
    ['an empty user_id', { user_id: '' }, /user_id must not be empty/],
    ['a numeric user_id', { user_id: 42 }, /user_id must be a string/],
    ['a numeric timestamp', { user_id: 'p', timestamp: 1 }, /timestamp must be a string/],
    ['a wrong item in an array', [{ user_id: 'p' }, { user_id: null }], /\[1\]\.user_id must be a string/],
    ['an empty array', [], /at least one event/],
    ['an array over the cap', Array.from({ length: 1001 }, (_, i) => ({ user_id: `p${i}` })), /at most 1000 items/],
    ['a string', 'just text', /./],
    ['broken JSON', '{"user_id"', /not valid JSON/],
  ])('refuses %s with 400 {error}, announcing nothing', async (_name, body, message) => {
    const before = heard.length;
    const response = await post(body);
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(message);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heard.length).toBe(before);
  });

  it('takes an admin key only: a device key is refused 403, the CRM key and no key 401', async () => {
    expect((await post(event(), DEVICE_KEY)).statusCode).toBe(403);
    expect((await post(event(), OPERATOR_KEY)).statusCode).toBe(401);
    expect((await post(event(), null)).statusCode).toBe(401);
  });
});

describe('POST /v1/compliance/events with Redis out of reach', () => {
  it('answers 503 {error} with Retry-After, so the caller sends the events again', async () => {
    const proxied = await openBehindProxies();
    try {
      await proxied.redis.stop();
      const response = await proxied.h.app.inject({
        method: 'POST',
        url: '/v1/compliance/events',
        headers: { 'content-type': 'application/json', 'x-api-key': ADMIN_KEY },
        payload: JSON.stringify({ user_id: uniqueName('player') }),
      });
      expect(response.statusCode).toBe(503);
      expect(response.headers['retry-after']).toBeDefined();
      expect(response.json().error).toMatch(/Redis is unavailable/);
    } finally {
      await proxied.close();
    }
  });
});
