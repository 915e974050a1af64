import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { fcmToken, pushRequest, uniqueBrandId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// Every push and device route answers only the brands of the credential it is given: a push to
// another brand is refused, and another brand's pushes, events, devices and dead letters are not
// there for it. Keys without @ open every brand, as before.

const SECRET = 'brand-scope-spec-tracking-secret';

interface FeedPage {
  events: { cursor: string; push_id: string; activity: { brand_id: number } }[];
  next_cursor: string;
}

describe('routes scoped to the brands of the credential', () => {
  const b1 = uniqueBrandId();
  const b2 = uniqueBrandId();
  const key = (name: string) => `${name}-${uniqueName('key')}`;
  const K_ALL = key('k-all');
  const K1 = key('k1');
  const K2 = key('k2');
  const D_ALL = key('d-all');
  const D1 = key('d1');
  const A_ALL = key('a-all');
  const A1 = key('a1');
  let h: Harness;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open({
      OPERATOR_API_KEYS: `${K_ALL},${K1}@${b1},${K2}@${b2}`,
      INTERNAL_DEVICE_KEYS: `${D_ALL},${D1}@${b1}`,
      INTERNAL_ADMIN_KEYS: `${A_ALL},${A1}@${b1}`,
      TRACKING_SECRET: SECRET,
    });
  });
  afterAll(async () => {
    await h.close();
  });

  beforeEach(async () => {
    player = uniqueName('player');
    // The same player id in both brands.
    for (const brand of [b1, b2]) expect((await device(D_ALL, 'POST', '/v1/devices', { user_id: player, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() })).statusCode).toBe(201);
  });

  const call = (apiKey: string, method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<LightMyRequestResponse> => h.request(apiKey, method, url, body);
  const device = call;
  const storedOf = (brand: number) => h.stores.db.message.count({ where: { brandId: BigInt(brand), userId: player } });

  async function accept(apiKey: string, brand: number): Promise<string> {
    const response = await call(apiKey, 'POST', '/channels/push/single', pushRequest(brand, player));
    expect(response.statusCode).toBe(200);
    return response.json().push_id;
  }

  async function send(pushIds: string[]) {
    expect(await h.send(pushIds)).toMatchObject({ kind: 'done', sent: pushIds.length });
  }

  describe('accepting pushes', () => {
    it('accepts a single for a brand of the key and refuses one for another with 403, storing nothing', async () => {
      await accept(K1, b1);
      const queued = async () => (await h.jobs('fcm')).flatMap((job) => job.data.pushIds).length;
      const before = await queued();
      const refused = await call(K1, 'POST', '/channels/push/single', pushRequest(b2, player));

      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toEqual({ code: 403, error: `this credential does not open brand ${b2}` });
      expect(await storedOf(b2)).toBe(0);
      expect(await storedOf(b1)).toBe(1);
      expect(await queued()).toBe(before);
      await accept(K_ALL, b2);
      expect(await storedOf(b2)).toBe(1);
    });

    it("answers a batch's messages for another brand in failed, and accepts the others", async () => {
      const messages = [pushRequest(b1, player), pushRequest(b2, player), pushRequest(b1, player)];
      const response = await call(K1, 'POST', '/channels/push/batch', messages);

      expect(response.statusCode).toBe(200);
      const result = response.json();
      expect(result.successful.map((entry: { id: number }) => entry.id).sort()).toEqual([messages[0].activity.id, messages[2].activity.id].sort());
      expect(result.failed).toEqual([{ id: messages[1].activity.id, error: `message 1: this credential does not open brand ${b2}` }]);
      expect(result.fatal).toEqual([]);
      expect(await storedOf(b2)).toBe(0);
      expect(await storedOf(b1)).toBe(2);
    });
  });

  describe('reading pushes', () => {
    it("answers another brand's push by id 404, as an unknown one", async () => {
      const mine = await accept(K1, b1);
      const theirs = await accept(K2, b2);

      expect((await call(K1, 'GET', `/channels/push/${mine}`)).statusCode).toBe(200);
      const hidden = await call(K1, 'GET', `/channels/push/${theirs}`);
      expect(hidden.statusCode).toBe(404);
      expect(hidden.json()).toEqual({ code: 404, error: `no push ${theirs}` });
      const unknown = randomUUID();
      expect((await call(K1, 'GET', `/channels/push/${unknown}`)).json()).toEqual({ code: 404, error: `no push ${unknown}` });
      expect((await call(K2, 'GET', `/channels/push/${theirs}`)).statusCode).toBe(200);
      expect((await call(K_ALL, 'GET', `/channels/push/${theirs}`)).statusCode).toBe(200);
    });

    it("lists another brand's pushes in not_found", async () => {
      const mine = await accept(K1, b1);
      const theirs = await accept(K2, b2);
      const url = `/channels/push/status?push_id=${mine}&push_id=${theirs}`;

      const scoped = (await call(K1, 'GET', url)).json();
      expect(scoped.pushes.map((push: { push_id: string }) => push.push_id)).toEqual([mine]);
      expect(scoped.not_found).toEqual([theirs]);
      const all = (await call(K_ALL, 'GET', url)).json();
      expect(all.pushes.map((push: { push_id: string }) => push.push_id).sort()).toEqual([mine, theirs].sort());
      expect(all.not_found).toEqual([]);
    });

    it("pages the feed with a key's brand's events only, each once and in order", async () => {
      const { _max } = await h.stores.db.event.aggregate({ _max: { feedSeq: true } });
      const start = (_max.feedSeq ?? 0n).toString();
      const brands = [b1, b2, b2, b1, b2, b1, b1, b2, b2, b2, b1];
      const ids: string[] = [];
      for (const brand of brands) ids.push(await accept(K_ALL, brand));
      for (const id of ids) await send([id]);

      /** Our pushes' events read with `apiKey`, `limit` a page, until they are all in and the cursor stands still. */
      async function drain(apiKey: string, limit: number, expected: number) {
        const seen: FeedPage['events'] = [];
        let cursor = start;
        for (let pages = 0; pages < 500; pages++) {
          const response = await call(apiKey, 'GET', `/channels/push/events?after=${cursor}&limit=${limit}`);
          expect(response.statusCode).toBe(200);
          const page = response.json() as FeedPage;
          expect(page.events.length).toBeLessThanOrEqual(limit);
          seen.push(...page.events.filter((event) => ids.includes(event.push_id)));
          if (seen.length >= expected && page.next_cursor === cursor) return seen;
          cursor = page.next_cursor;
        }
        throw new Error(`the feed did not settle: ${seen.length} of ${expected}`);
      }

      const all = await drain(K_ALL, 3, ids.length);
      const ofBrand = (brand: number) => all.filter((event) => event.activity.brand_id === brand).map((event) => event.push_id);
      expect(ofBrand(b1)).toHaveLength(5);
      for (const limit of [1, 2]) {
        expect((await drain(K1, limit, 5)).map((event) => event.push_id)).toEqual(ofBrand(b1));
      }
      expect((await drain(K2, 2, 6)).map((event) => event.push_id)).toEqual(ofBrand(b2));
    });
  });

  describe('devices', () => {
    const list = async (apiKey: string, query = '') => {
      const response = await device(apiKey, 'GET', `/v1/players/${encodeURIComponent(player)}/devices${query}`);
      expect(response.statusCode).toBe(200);
      return (response.json() as { devices: { id: string; brand_id: number }[] }).devices;
    };

    it("lists only the key's brands' devices of a player registered in both", async () => {
      expect((await list(D1)).map((row) => row.brand_id)).toEqual([b1]);
      expect(await list(D1, `?brand_id=${b2}`)).toEqual([]);
      expect((await list(D_ALL)).map((row) => row.brand_id).sort()).toEqual([b1, b2].sort());
    });

    it("refuses with 403 to register another brand's device, or to take over another brand's token", async () => {
      const refused = await device(D1, 'POST', '/v1/devices', { user_id: player, brand_id: b2, provider: 'fcm', platform: 'android', token: fcmToken() });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toEqual({ code: 403, error: `this credential does not open brand ${b2}` });

      const token = fcmToken();
      expect((await device(D_ALL, 'POST', '/v1/devices', { user_id: player, brand_id: b2, provider: 'fcm', token })).statusCode).toBe(201);
      const taken = await device(D1, 'POST', '/v1/devices', { user_id: player, brand_id: b1, provider: 'fcm', token });
      expect(taken.statusCode).toBe(403);
      expect(taken.json()).toEqual({ code: 403, error: 'this token is a device of a brand this credential does not open' });
      // Both still in brand 2: the one registered before and this token.
      expect((await list(D_ALL, `?brand_id=${b2}`)).length).toBe(2);
      expect((await device(D1, 'POST', '/v1/devices', { user_id: player, brand_id: b1, provider: 'fcm', token: fcmToken() })).statusCode).toBe(201);
    });

    it("answers a delete of another brand's device 404, as an unknown one, and keeps it", async () => {
      const [theirs] = await list(D_ALL, `?brand_id=${b2}`);
      const [mine] = await list(D_ALL, `?brand_id=${b1}`);

      const hidden = await device(D1, 'DELETE', `/v1/devices/${theirs.id}`);
      expect(hidden.statusCode).toBe(404);
      expect(hidden.json()).toEqual({ code: 404, error: `no device ${theirs.id}` });
      expect(await list(D_ALL, `?brand_id=${b2}`)).toHaveLength(1);
      expect((await device(D1, 'DELETE', `/v1/devices/${mine.id}`)).statusCode).toBe(204);
      expect(await list(D_ALL, `?brand_id=${b1}`)).toEqual([]);
    });
  });

  describe('dead letters', () => {
    /** A dead letter as the dispatcher writes it, of the push's event or of an event with no push. */
    async function deadLetter(pushId: string | null): Promise<string> {
      const event = pushId
        ? await h.stores.db.event.findFirstOrThrow({ where: { pushId, topic: 'push.status' } })
        : await h.stores.db.event.create({ data: { id: randomUUID(), topic: uniqueName('topic'), orderingKey: uniqueName('key'), status: 'completed' } });
      await h.stores.db.dispatchRetry.create({
        data: { eventId: event.id, topic: event.topic, orderingKey: event.orderingKey, seq: event.seq, state: 'dead', lastError: 'HTTP 400', attempts: 3 },
      });
      return event.id;
    }
    const listed = async (apiKey: string) => {
      const response = await call(apiKey, 'GET', '/v1/webhooks/dead-letters?limit=1000');
      expect(response.statusCode).toBe(200);
      return (response.json() as { events: { event_id: string }[] }).events.map((event) => event.event_id);
    };

    it("shows and redrives a bound admin key's brands' only; one of no brand only to a key of every brand", async () => {
      const pushes = [await accept(K1, b1), await accept(K2, b2)];
      await send(pushes);
      const [mine, theirs, none] = [await deadLetter(pushes[0]), await deadLetter(pushes[1]), await deadLetter(null)];

      const scoped = await listed(A1);
      expect(scoped).toContain(mine);
      expect(scoped).not.toContain(theirs);
      expect(scoped).not.toContain(none);
      expect(await listed(A_ALL)).toEqual(expect.arrayContaining([mine, theirs, none]));

      const redrive = await call(A1, 'POST', '/v1/webhooks/dead-letters/redrive', { event_ids: [mine, theirs, none] });
      expect(redrive.json()).toEqual({ redriven: 1 });
      const states = await h.stores.db.dispatchRetry.findMany({ where: { eventId: { in: [mine, theirs, none] } } });
      expect(Object.fromEntries(states.map((row) => [row.eventId, row.state]))).toEqual({ [mine]: 'pending', [theirs]: 'dead', [none]: 'dead' });
    });
  });
});
