import { apnsToken, fcmToken, INTERNAL_KEY, pushRequest, uniqueBrandId, uniqueName, webPushSubscription } from '@operator/testing';
import { Harness } from './test/harness';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type DeviceBody = {
  id: string;
  user_id: string;
  brand_id: number;
  provider: string;
  platform: string | null;
  token: string;
  active: boolean;
  deactivated_reason: string | null;
  created_at: string;
  updated_at: string;
};

const isoString = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

describe('the device registry (/v1)', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open();
  });
  afterAll(() => h.close());

  beforeEach(() => {
    brand = uniqueBrandId();
    player = uniqueName('player');
  });

  const register = (body: Record<string, unknown>) => h.internal('POST', '/v1/devices', body);
  const list = async (userId: string, query = '') => {
    const response = await h.internal('GET', `/v1/players/${encodeURIComponent(userId)}/devices${query}`);
    expect(response.statusCode).toBe(200);
    return (response.json() as { devices: DeviceBody[] }).devices;
  };

  describe('POST /v1/devices', () => {
    it('registers an FCM device with 201 and answers with the device', async () => {
      const token = fcmToken();
      const response = await register({ user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token });

      expect(response.statusCode).toBe(201);
      const device = response.json() as DeviceBody;
      expect(device).toEqual({
        id: expect.stringMatching(UUID),
        user_id: player,
        brand_id: brand,
        provider: 'fcm',
        platform: 'android',
        token,
        active: true,
        deactivated_reason: null,
        created_at: isoString,
        updated_at: isoString,
      });
      expect(new Date(device.created_at).toISOString()).toBe(device.created_at);

      const row = await h.stores.db.device.findUnique({ where: { id: device.id } });
      expect(row).toMatchObject({ brandId: BigInt(brand), userId: player, provider: 'fcm', platform: 'android', token, active: true, p256dh: null, auth: null });
    });

    it('answers 200 with the same device when the same body is registered again', async () => {
      const body = { user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() };
      const first = await register(body);
      const second = await register(body);

      expect(first.statusCode).toBe(201);
      expect(second.statusCode).toBe(200);
      expect(second.json().id).toBe(first.json().id);
      expect(second.json()).toMatchObject({ user_id: player, brand_id: brand, token: body.token, active: true });
      expect(await list(player)).toHaveLength(1);
    });

    it('moves a token registered again by another player of another brand to that player', async () => {
      const token = fcmToken();
      const first = await register({ user_id: player, brand_id: brand, provider: 'fcm', token });
      const newPlayer = uniqueName('player');
      const newBrand = uniqueBrandId();
      const second = await register({ user_id: newPlayer, brand_id: newBrand, provider: 'fcm', token });

      expect(first.statusCode).toBe(201);
      expect(second.statusCode).toBe(200);
      expect(second.json()).toMatchObject({ id: first.json().id, user_id: newPlayer, brand_id: newBrand, token, active: true });

      expect(await list(player)).toEqual([]);
      expect((await list(newPlayer)).map((d) => d.id)).toEqual([first.json().id]);
      expect(await h.stores.db.device.count({ where: { provider: 'fcm', token } })).toBe(1);
    });

    it('moves a token to another player of the same brand', async () => {
      const token = fcmToken();
      const first = await register({ user_id: player, brand_id: brand, provider: 'fcm', token });
      const newPlayer = uniqueName('player');
      const second = await register({ user_id: newPlayer, brand_id: brand, provider: 'fcm', token });

      expect(second.statusCode).toBe(200);
      expect(second.json()).toMatchObject({ id: first.json().id, user_id: newPlayer, brand_id: brand });
      expect(await list(player, `?brand_id=${brand}`)).toEqual([]);
      expect((await list(newPlayer, `?brand_id=${brand}`)).map((d) => d.id)).toEqual([first.json().id]);
    });

    it('registers an APNs device with a hex token', async () => {
      const token = apnsToken();
      const response = await register({ user_id: player, brand_id: brand, provider: 'apns', platform: 'ios', token });
      expect(response.statusCode).toBe(201);
      expect(response.json()).toMatchObject({ provider: 'apns', platform: 'ios', token, active: true });
    });

    it('answers 400 naming the token for an APNs token that is not hex', async () => {
      const response = await register({ user_id: player, brand_id: brand, provider: 'apns', token: 'not-a-hex-token-zzzzzzzz' });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(/token/), code: response.statusCode });
      expect(await list(player)).toEqual([]);
    });

    it.each([
      ['hms', 'android', `IQAAAACy0kYqAADdOR${'x'.repeat(40)}_-:Gtb1kqAN5V0`],
      ['onesignal', 'ios', '1dd608f2-c6a1-11e3-851d-000c2940e62c'],
    ] as const)('registers a %s device with its token', async (provider, platform, token) => {
      const response = await register({ user_id: player, brand_id: brand, provider, platform, token });
      expect(response.statusCode).toBe(201);
      expect(response.json()).toMatchObject({ provider, platform, token, active: true });
    });

    it.each([
      ['hms', 'short-token', /HMS push token/],
      ['hms', `has spaces ${'x'.repeat(30)}`, /HMS push token/],
      ['onesignal', 'not-a-subscription-id', /OneSignal subscription id/],
      ['onesignal', '1dd608f2c6a111e3851d000c2940e62c', /OneSignal subscription id/],
    ] as const)('answers 400 naming the token for a %s token that is not one (%s)', async (provider, token, message) => {
      const response = await register({ user_id: player, brand_id: brand, provider, token });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(message), code: response.statusCode });
      expect(await list(player)).toEqual([]);
    });

    describe('webpush', () => {
      it('registers a subscription with its endpoint as the token and stores its keys', async () => {
        const subscription = webPushSubscription();
        const response = await register({ user_id: player, brand_id: brand, provider: 'webpush', platform: 'web', subscription });

        expect(response.statusCode).toBe(201);
        const device = response.json() as DeviceBody;
        expect(device).toMatchObject({ provider: 'webpush', platform: 'web', token: subscription.endpoint, active: true, deactivated_reason: null });
        expect(device).not.toHaveProperty('subscription');
        expect(device).not.toHaveProperty('p256dh');

        const row = await h.stores.db.device.findUnique({ where: { id: device.id } });
        expect(row).toMatchObject({ token: subscription.endpoint, p256dh: subscription.keys.p256dh, auth: subscription.keys.auth });
      });

      it('replaces the stored keys when the same endpoint is registered with new keys', async () => {
        const first = webPushSubscription();
        const second = webPushSubscription(first.endpoint);
        const a = await register({ user_id: player, brand_id: brand, provider: 'webpush', subscription: first });
        const b = await register({ user_id: player, brand_id: brand, provider: 'webpush', subscription: second });
        expect([a.statusCode, b.statusCode]).toEqual([201, 200]);
        expect(b.json().id).toBe(a.json().id);
        const row = await h.stores.db.device.findUnique({ where: { id: a.json().id } });
        expect(row).toMatchObject({ p256dh: second.keys.p256dh, auth: second.keys.auth });
      });

      it('answers 400 for webpush without a subscription', async () => {
        const response = await register({ user_id: player, brand_id: brand, provider: 'webpush', token: fcmToken() });
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: expect.stringMatching(/subscription/), code: response.statusCode });
      });

      it('answers 400 for fcm with a subscription and no token', async () => {
        const response = await register({ user_id: player, brand_id: brand, provider: 'fcm', subscription: webPushSubscription() });
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: expect.stringMatching(/token/), code: response.statusCode });
      });

      it('answers 400 for an endpoint that is not https', async () => {
        const subscription = webPushSubscription('http://push.example.test/send/abc');
        const response = await register({ user_id: player, brand_id: brand, provider: 'webpush', subscription });
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: expect.stringMatching(/subscription\.endpoint/), code: response.statusCode });
        expect(await list(player)).toEqual([]);
      });

      it.each([
        'https://fcm.googleapis.com/fcm/send/dGhpc2lzYW5leGFtcGxl:APA91bExample',
        'https://updates.push.services.mozilla.com/wpush/v2/gAAAAABexample',
        'https://web.push.apple.com/QGuQyavXutnMH2Uie4example',
        'https://wns2-db5p.notify.windows.com/w/?token=BQYAAABexample',
      ])('accepts %s under the default WEBPUSH_ALLOWED_ORIGINS', async (endpoint) => {
        const response = await register({ user_id: player, brand_id: brand, provider: 'webpush', platform: 'web', subscription: webPushSubscription(`${endpoint}${uniqueName('-')}`) });
        expect(response.statusCode).toBe(201);
      });

      it.each([
        ['https://169.254.169.254/latest/meta-data', 'subscription.endpoint: origin https://169.254.169.254 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://127.0.0.1:6379/', 'subscription.endpoint: origin https://127.0.0.1:6379 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://10.0.0.5/push', 'subscription.endpoint: origin https://10.0.0.5 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://fcm.googleapis.com:8443/fcm/send/abc', 'subscription.endpoint: origin https://fcm.googleapis.com:8443 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://notify.windows.com/w', 'subscription.endpoint: origin https://notify.windows.com is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://169.254.169.254;x.notify.windows.com/w', 'subscription.endpoint: host "169.254.169.254;x.notify.windows.com" is not written as a plain domain name or IP address'],
      ])('answers 400 naming the rule for %s under the default WEBPUSH_ALLOWED_ORIGINS, and stores nothing', async (endpoint, error) => {
        const response = await register({ user_id: player, brand_id: brand, provider: 'webpush', subscription: webPushSubscription(endpoint) });
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error, code: response.statusCode });
        expect(await list(player)).toEqual([]);
        expect(await h.stores.db.device.count({ where: { token: endpoint } })).toBe(0);
      });
    });

    describe('webpush with WEBPUSH_ALLOWED_ORIGINS of its own', () => {
      let local: Harness;
      beforeAll(async () => {
        local = await Harness.open({ WEBPUSH_ALLOWED_ORIGINS: 'https://127.0.0.1:9443,https://*.push.example.net' });
      });
      afterAll(() => local.close());

      const registerAt = (endpoint: string) => local.internal('POST', '/v1/devices', { user_id: player, brand_id: brand, provider: 'webpush', subscription: webPushSubscription(endpoint) });

      it.each(['https://127.0.0.1:9443/push/a', 'https://eu.push.example.net/send/b', 'https://a.b.push.example.net/send/c'])('accepts %s', async (endpoint) => {
        const response = await registerAt(`${endpoint}-${uniqueName('sub')}`);
        expect(response.statusCode).toBe(201);
        expect(response.json()).toMatchObject({ provider: 'webpush', token: expect.stringContaining(endpoint) });
      });

      it.each([
        ['https://169.254.169.254/latest/meta-data', 'subscription.endpoint: origin https://169.254.169.254 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://127.0.0.1:6379/', 'subscription.endpoint: origin https://127.0.0.1:6379 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://127.0.0.1:9444/push/a', 'subscription.endpoint: origin https://127.0.0.1:9444 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://127.0.0.1/push/a', 'subscription.endpoint: origin https://127.0.0.1 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://localhost:9443/push/a', 'subscription.endpoint: origin https://localhost:9443 is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://push.example.net/send/a', 'subscription.endpoint: origin https://push.example.net is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://fcm.googleapis.com/fcm/send/a', 'subscription.endpoint: origin https://fcm.googleapis.com is not in WEBPUSH_ALLOWED_ORIGINS'],
        ['https://user:pw@127.0.0.1:9443/push/a', 'subscription.endpoint: must not carry user info'],
        ['https://user:pw@eu.push.example.net/send/a', 'subscription.endpoint: must not carry user info'],
        ['https://127.1:9443/push/a', 'subscription.endpoint: host "127.1" is not written as a plain domain name or IP address'],
      ])('answers 400 naming the rule for %s, and stores nothing', async (endpoint, error) => {
        const response = await registerAt(endpoint);
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error, code: response.statusCode });
        expect(await list(player)).toEqual([]);
      });

      it('answers 400 for an http endpoint on a listed host', async () => {
        const response = await registerAt('http://127.0.0.1:9443/push/a');
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: expect.stringMatching(/subscription\.endpoint .*https/), code: response.statusCode });
        expect(await list(player)).toEqual([]);
      });
    });

    describe('bad input', () => {
      const valid = () => ({ user_id: uniqueName('player'), brand_id: uniqueBrandId(), provider: 'fcm', token: fcmToken() });
      const cases: [string, (body: Record<string, unknown>) => Record<string, unknown>, RegExp][] = [
        ['a missing user_id', ({ user_id: _u, ...rest }) => rest, /user_id is required/],
        ['an unknown provider', (body) => ({ ...body, provider: 'sms' }), /provider must be one of fcm, apns, webpush/],
        ['an unknown platform', (body) => ({ ...body, platform: 'tv' }), /platform must be one of android, ios, web/],
        ['a string brand_id', (body) => ({ ...body, brand_id: String(body.brand_id) }), /brand_id must be an integer/],
        ['an empty token', (body) => ({ ...body, token: '' }), /token must not be empty/],
      ];

      it.each(cases)('answers 400 naming the field for %s', async (_name, mutate, message) => {
        const body = mutate(valid());
        const response = await register(body);
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: expect.stringMatching(message), code: response.statusCode });
        if (typeof body.token === 'string' && body.token) {
          expect(await h.stores.db.device.count({ where: { token: body.token } })).toBe(0);
        }
      });

      it('answers 400 for a body that is not JSON', async () => {
        const response = await h.app.inject({
          method: 'POST',
          url: '/v1/devices',
          headers: { 'x-api-key': INTERNAL_KEY, 'content-type': 'application/json' },
          payload: '{"user_id": ',
        });
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: expect.stringMatching(/not valid JSON/), code: response.statusCode });
      });
    });

    it('makes a deactivated device active again when it is registered again', async () => {
      const body = { user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() };
      const { id } = (await register(body)).json() as DeviceBody;
      await h.stores.db.device.update({ where: { id }, data: { active: false, deactivatedReason: 'unregistered', deactivatedAt: new Date() } });
      expect((await list(player))[0]).toMatchObject({ id, active: false, deactivated_reason: 'unregistered' });

      const again = await register(body);
      expect(again.statusCode).toBe(200);
      expect(again.json()).toMatchObject({ id, active: true, deactivated_reason: null });
      const row = await h.stores.db.device.findUnique({ where: { id } });
      expect(row).toMatchObject({ active: true, deactivatedReason: null, deactivatedAt: null });
    });
  });

  describe('GET /v1/players/:user_id/devices', () => {
    it('answers 400, not 500, to a NUL character the database cannot store', async () => {
      for (const url of ['/v1/players/a%00b/devices', '/v1/players/a%00b/wallet', '/v1/credits?user_id=a%00b']) {
        const response = await h.internal('GET', url);
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({ error: 'text fields must not contain NUL characters', code: response.statusCode });
      }
    });

    it("lists all the player's devices, inactive ones too, with their active flag", async () => {
      const otherBrand = uniqueBrandId();
      const fcm = (await register({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() })).json() as DeviceBody;
      const apns = (await register({ user_id: player, brand_id: brand, provider: 'apns', token: apnsToken() })).json() as DeviceBody;
      const web = (await register({ user_id: player, brand_id: otherBrand, provider: 'webpush', subscription: webPushSubscription() })).json() as DeviceBody;
      await register({ user_id: uniqueName('someone-else'), brand_id: brand, provider: 'fcm', token: fcmToken() });
      await h.stores.db.device.update({ where: { id: apns.id }, data: { active: false, deactivatedReason: 'unregistered' } });

      const devices = await list(player);
      expect(devices).toHaveLength(3);
      const byId = new Map(devices.map((d) => [d.id, d]));
      expect(byId.get(fcm.id)).toEqual(fcm);
      expect(byId.get(apns.id)).toMatchObject({ provider: 'apns', brand_id: brand, active: false, deactivated_reason: 'unregistered' });
      expect(byId.get(web.id)).toMatchObject({ provider: 'webpush', brand_id: otherBrand, active: true, token: web.token });
    });

    it('filters by ?brand_id=', async () => {
      const otherBrand = uniqueBrandId();
      const mine = (await register({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() })).json() as DeviceBody;
      const other = (await register({ user_id: player, brand_id: otherBrand, provider: 'fcm', token: fcmToken() })).json() as DeviceBody;

      expect((await list(player, `?brand_id=${brand}`)).map((d) => d.id)).toEqual([mine.id]);
      expect((await list(player, `?brand_id=${otherBrand}`)).map((d) => d.id)).toEqual([other.id]);
      expect(await list(player, `?brand_id=${uniqueBrandId()}`)).toEqual([]);
    });

    it('answers 400 for a brand_id that is not a number', async () => {
      const response = await h.internal('GET', `/v1/players/${player}/devices?brand_id=abc`);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.stringMatching(/brand_id/), code: response.statusCode });
    });

    it('answers 200 with an empty list for a player with no device', async () => {
      const response = await h.internal('GET', `/v1/players/${uniqueName('nobody')}/devices`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ devices: [] });
    });

    it('finds a player whose user_id needs URL-encoding', async () => {
      const oddPlayer = `${uniqueName('player 1')}/é`;
      const registered = await register({ user_id: oddPlayer, brand_id: brand, provider: 'fcm', token: fcmToken() });
      expect(registered.statusCode).toBe(201);
      expect(registered.json().user_id).toBe(oddPlayer);

      const devices = await list(oddPlayer);
      expect(devices.map((d) => d.id)).toEqual([registered.json().id]);
      expect(devices[0].user_id).toBe(oddPlayer);
    });
  });

  describe('DELETE /v1/devices/:id', () => {
    it('answers 204 and the device is gone; deleting it again answers 404', async () => {
      const keep = (await register({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() })).json() as DeviceBody;
      const gone = (await register({ user_id: player, brand_id: brand, provider: 'apns', token: apnsToken() })).json() as DeviceBody;

      const response = await h.internal('DELETE', `/v1/devices/${gone.id}`);
      expect(response.statusCode).toBe(204);
      expect(response.body).toBe('');
      expect((await list(player)).map((d) => d.id)).toEqual([keep.id]);
      expect(await h.stores.db.device.findUnique({ where: { id: gone.id } })).toBeNull();

      const again = await h.internal('DELETE', `/v1/devices/${gone.id}`);
      expect(again.statusCode).toBe(404);
      expect(again.json()).toEqual({ error: expect.stringContaining(gone.id), code: again.statusCode });
    });

    it('answers 404 for an id that is not a uuid', async () => {
      const response = await h.internal('DELETE', '/v1/devices/not-a-uuid');
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
    });
  });

  describe('the registry decides who can be pushed to', () => {
    it('accepts a push once the player has a device, and answers 404 once every device is deleted', async () => {
      expect((await h.single(pushRequest(brand, player))).statusCode).toBe(404);

      const a = (await register({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() })).json() as DeviceBody;
      const b = (await register({ user_id: player, brand_id: brand, provider: 'webpush', subscription: webPushSubscription() })).json() as DeviceBody;
      const accepted = await h.single(pushRequest(brand, player));
      expect(accepted.statusCode).toBe(200);
      expect(accepted.json()).toEqual({ push_id: expect.stringMatching(UUID) });

      for (const { id } of [a, b]) expect((await h.internal('DELETE', `/v1/devices/${id}`)).statusCode).toBe(204);
      expect(await list(player)).toEqual([]);

      const refused = await h.single(pushRequest(brand, player));
      expect(refused.statusCode).toBe(404);
      expect(refused.json()).toEqual({ error: expect.stringMatching(/no active device/), code: refused.statusCode });
    });
  });
});
