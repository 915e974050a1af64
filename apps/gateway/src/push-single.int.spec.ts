import { apnsToken, fcmToken, pushRequest, uniqueBrandId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('POST /channels/push/single', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open();
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'apns', platform: 'ios', token: apnsToken() });
  });

  it('answers 200 with a push_id once the message, its deliveries and its send jobs are stored', async () => {
    const request = { ...pushRequest(brand, player), image_url: 'https://cdn.example.test/a.png', extra_field: { kept: true } };
    const headers = {
      'X-Service-Id': 'svc-id-1',
      'X-Service-Activityid': '71',
      'X-Service-Actionid': '73',
      'X-Service-Actiongroupid': '72',
      'X-Service-Actioncommunicationprofileid': '9',
      'X-Service-Triggerhash': 'th-1',
    };
    const response = await h.single(request, headers);

    expect(response.statusCode).toBe(200);
    const { push_id } = response.json();
    expect(push_id).toMatch(UUID_V7);

    const [row] = await h.messageRows(brand);
    expect(row.id).toBe(push_id);
    expect(row.crmMessageId).toBe(BigInt(request.activity.id));
    expect(row.status).toBe('accepted');
    expect(row.meta).toEqual({ campaign: 'weekend', variant: 2 });
    expect(row.payload).toEqual(request);
    expect(row.crmHeaders).toEqual({
      id: 'svc-id-1',
      activity_id: '71',
      action_id: '73',
      action_group_id: '72',
      action_communication_profile_id: '9',
      trigger_hash: 'th-1',
    });
    expect(row.deliveries.map((d) => `${d.provider}:${d.status}`).sort()).toEqual(['apns:pending', 'fcm:pending']);

    for (const provider of ['fcm', 'apns'] as const) {
      const jobs = await h.jobs(provider);
      const mine = jobs.filter((job) => job.data.pushIds.includes(push_id));
      expect(mine).toHaveLength(1);
      expect(mine[0].data).toEqual({ pushIds: [push_id] });
      expect(mine[0].id).toBe(`push-${push_id}`);
    }
    expect((await h.jobs('webpush')).filter((job) => job.data.pushIds.includes(push_id))).toHaveLength(0);
  });

  it('keeps the meta key order as the CRM sent it', async () => {
    const meta = { zeta: 1, alpha: { b: 2, a: 1 }, mid: [3, 'x'] };
    const response = await h.single({ ...pushRequest(brand, player), meta });
    expect(response.statusCode).toBe(200);
    const [row] = await h.messageRows(brand);
    expect(JSON.stringify(row.meta)).toBe(JSON.stringify(meta));
  });

  it('treats null in an optional field as absent', async () => {
    const response = await h.single({ ...pushRequest(brand, player), image_url: null, android: null, web: { dir: null, tag: 't' }, meta: null });
    expect(response.statusCode).toBe(200);
    const [row] = await h.messageRows(brand);
    expect(row.meta).toBeNull();
    expect(row.payload).toMatchObject({ web: { tag: 't' } });
    expect(row.payload).not.toHaveProperty('image_url');
  });

  it('answers a retried message with the same push_id and neither stores nor queues it again', async () => {
    const request = pushRequest(brand, player);
    const first = await h.single(request);
    const second = await h.single(request);
    const third = await h.single({ ...request, title: 'changed on retry' });

    expect([first.statusCode, second.statusCode, third.statusCode]).toEqual([200, 200, 200]);
    expect(second.json().push_id).toBe(first.json().push_id);
    expect(third.json().push_id).toBe(first.json().push_id);
    expect(await h.messageRows(brand)).toHaveLength(1);
    const jobs = (await h.jobs('fcm')).filter((job) => job.data.pushIds.includes(first.json().push_id));
    expect(jobs).toHaveLength(1);
  });

  it('stores one row and queues one job when identical requests race', async () => {
    const request = pushRequest(brand, player);
    const responses = await Promise.all(Array.from({ length: 12 }, () => h.single(request)));

    expect(responses.map((r) => r.statusCode)).toEqual(Array(12).fill(200));
    const pushIds = new Set(responses.map((r) => r.json().push_id));
    expect(pushIds.size).toBe(1);
    const rows = await h.messageRows(brand);
    expect(rows).toHaveLength(1);
    expect(rows[0].deliveries).toHaveLength(2);
    const [pushId] = pushIds;
    for (const provider of ['fcm', 'apns'] as const) {
      expect((await h.jobs(provider)).filter((job) => job.data.pushIds.includes(pushId))).toHaveLength(1);
    }
  });

  it('uses (brand_id, activity.id) as the identity: the same id in another brand is another message', async () => {
    const otherBrand = uniqueBrandId();
    await h.registerDevice({ user_id: player, brand_id: otherBrand, provider: 'fcm', token: fcmToken() });
    const request = pushRequest(brand, player);
    const a = await h.single(request);
    const b = await h.single({ ...request, activity: { ...request.activity, brand_id: otherBrand } });
    expect(a.statusCode).toBe(200);
    expect(b.statusCode).toBe(200);
    expect(b.json().push_id).not.toBe(a.json().push_id);
  });

  describe('a player who cannot be reached', () => {
    it('answers 404 when the player has no device, and stores nothing', async () => {
      const response = await h.single(pushRequest(brand, uniqueName('nobody')));
      expect(response.statusCode).toBe(404);
      expect(response.json().error).toMatch(/no active device/);
      expect(await h.messageRows(brand)).toHaveLength(0);
    });

    it('answers 404 when the player has devices only in another brand', async () => {
      const response = await h.single(pushRequest(uniqueBrandId(), player));
      expect(response.statusCode).toBe(404);
    });

    it('answers 404 when every device of the player is inactive', async () => {
      await h.stores.db.device.updateMany({ where: { brandId: BigInt(brand), userId: player }, data: { active: false } });
      const response = await h.single(pushRequest(brand, player));
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
    });

    it('sends only to the active devices', async () => {
      await h.stores.db.device.updateMany({ where: { brandId: BigInt(brand), userId: player, provider: 'apns' }, data: { active: false } });
      const response = await h.single(pushRequest(brand, player));
      expect(response.statusCode).toBe(200);
      const [row] = await h.messageRows(brand);
      expect(row.deliveries.map((d) => d.provider)).toEqual(['fcm']);
    });
  });

  describe('bad input', () => {
    const cases: [string, (r: ReturnType<typeof pushRequest>) => unknown, RegExp][] = [
      ['a missing title', ({ title: _t, ...rest }) => rest, /title is required/],
      ['a missing activity', ({ activity: _a, ...rest }) => rest, /activity is required/],
      ['a missing activity.user_id', (r) => ({ ...r, activity: { ...r.activity, user_id: undefined } }), /activity\.user_id is required/],
      ['a string activity.id', (r) => ({ ...r, activity: { ...r.activity, id: '12' } }), /activity\.id must be an integer/],
      ['a fractional activity.brand_id', (r) => ({ ...r, activity: { ...r.activity, brand_id: 1.5 } }), /activity\.brand_id must be an integer/],
      ['a negative activity.action_id', (r) => ({ ...r, activity: { ...r.activity, action_id: -1 } }), /activity\.action_id must be at least 0/],
      ['an activity.id past 2^53', (r) => ({ ...r, activity: { ...r.activity, id: 2 ** 60 } }), /activity\.id must be at most/],
      ['a numeric user_id', (r) => ({ ...r, activity: { ...r.activity, user_id: 42 } }), /activity\.user_id must be a string/],
      ['a web.dir outside ltr/rtl/auto', (r) => ({ ...r, web: { dir: 'up' } }), /web\.dir must be one of ltr, rtl, auto/],
      ['a string web.timestamp', (r) => ({ ...r, web: { timestamp: 'now' } }), /web\.timestamp must be an integer/],
      ['a number in body_loc_arcs', (r) => ({ ...r, android: { body_loc_arcs: ['a', 2] } }), /android\.body_loc_arcs\[1\] must be a string/],
      ['an android that is not an object', (r) => ({ ...r, android: 'high' }), /android must be an object/],
      ['a title too long', (r) => ({ ...r, title: 'x'.repeat(1025) }), /title must be at most 1024 characters/],
      ['a body that is an array', () => [1, 2], /must be an object/],
      ['a NUL character in activity.user_id', (r) => ({ ...r, activity: { ...r.activity, user_id: 'p\u0000' } }), /activity\.user_id must not contain NUL characters/],
      ['a NUL character in activity.trigger_hash', (r) => ({ ...r, activity: { ...r.activity, trigger_hash: '\u0000' } }), /activity\.trigger_hash must not contain NUL/],
    ];

    it.each(cases)('answers 400 naming the field for %s', async (_name, mutate, message) => {
      const response = await h.single(mutate(pushRequest(brand, player)));
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(message), code: response.statusCode });
    });

    it('answers 400 for a body that is not JSON', async () => {
      const response = await h.single('{"activity": {');
      expect(response.statusCode).toBe(400);
      expect(response.json().error).toMatch(/not valid JSON/);
    });

    it('answers 400 for an empty body', async () => {
      const response = await h.single('');
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
    });

    it('reads the body as JSON whatever Content-Type is declared', async () => {
      const send = (payload: string) =>
        h.app.inject({ method: 'POST', url: '/channels/push/single', headers: { 'content-type': 'text/plain', 'x-api-key': 'test-operator-key' }, payload });
      expect((await send(JSON.stringify(pushRequest(brand, player)))).statusCode).toBe(200);
      const garbage = await send('hello');
      expect(garbage.statusCode).toBe(400);
      expect(garbage.json()).toEqual({ error: expect.stringMatching(/not valid JSON/), code: garbage.statusCode });
    });

    it('answers 404 in JSON for an unknown route, and 405 with Allow for a path of other methods', async () => {
      const response = await h.post('/channels/everything', {});
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
      // GET /channels/push/:push_id takes this path.
      const wrongMethod = await h.post('/channels/push/everything', {});
      expect({ status: wrongMethod.statusCode, allow: wrongMethod.headers.allow }).toEqual({ status: 405, allow: 'GET, HEAD' });
      expect(wrongMethod.json()).toEqual({ error: expect.any(String), code: 405 });
    });

    it('stores nothing for an invalid message', async () => {
      await h.single({ ...pushRequest(brand, player), title: 7 });
      expect(await h.messageRows(brand)).toHaveLength(0);
    });
  });
});

describe('request limits and the header word', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.open({ BODY_LIMIT_BYTES: '2048', CRM_HEADER_WORD: 'Acme' });
  });
  afterAll(() => h.close());

  it('answers 413 for a body over the size limit', async () => {
    const response = await h.single({ ...pushRequest(1, 'p'), body: 'x'.repeat(4000) });
    expect(response.statusCode).toBe(413);
    expect(response.json()).toEqual({ error: 'request body is larger than 2048 bytes', code: response.statusCode });
  });

  it('reads the CRM headers with the configured middle word', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
    const response = await h.single(pushRequest(brand, player), { 'X-Acme-Id': 'acme-1', 'X-Acme-Triggerhash': 'acme-th', 'X-Service-Id': 'ignored' });
    expect(response.statusCode).toBe(200);
    const [row] = await h.messageRows(brand);
    expect(row.crmHeaders).toEqual({ id: 'acme-1', trigger_hash: 'acme-th' });
  });
});
