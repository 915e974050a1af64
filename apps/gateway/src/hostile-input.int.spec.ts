import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createBonusDeps, processCredit } from '@operator/bonus';
import { MAX_CRM_HEADER_BYTES, MAX_DEVICE_TOKEN_BYTES, MAX_JSON_DEPTH, MAX_USER_ID_LENGTH } from '@operator/contract';
import { getCredit, playerAccounts, postTransaction } from '@operator/db';
import { fcmToken, INTERNAL_KEY, pushRequest, uniqueBrandId, uniqueId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// Every input is either stored or refused at the edge with a 4xx {"error"} that names the field and
// the limit: never a 5xx (the CRM retries it forever), never a 2xx for something that fails later.

type Response = { statusCode: number; body: string; json(): any };

const silentLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** JSON text of `levels` objects nested in each other: {"a":{"a":...1...}}; arrays past 10,000 levels, to stay short. */
const nested = (levels: number) =>
  levels > 10_000 ? `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}` : `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

/** A push request's JSON text with `meta` replaced by the given JSON text. */
const withRawField = (request: object, field: string, rawValue: string) => `${JSON.stringify(request).slice(0, -1)},"${field}":${rawValue}}`;

const expectRefused = (response: Response, status: number, message: RegExp) => {
  expect({ status: response.statusCode, body: response.json() }).toEqual({ status, body: { error: expect.stringMatching(message), code: status } });
};

function crmHeaders(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    'X-Service-Id': uniqueName('svc'),
    'X-Service-Activityid': String(uniqueId()),
    'X-Service-Actionid': '7',
    'X-Service-Triggerhash': uniqueName('hash'),
    ...overrides,
  };
}

describe('hostile input at the edge', () => {
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
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
  });

  const put = (url: string, body: unknown) =>
    h.app.inject({ method: 'PUT', url, headers: { 'x-api-key': INTERNAL_KEY, 'content-type': 'application/json' }, payload: JSON.stringify(body) });

  async function createBonus(amount: string, wagering: number, currency = 'EUR') {
    const code = uniqueName('bonus');
    const response = await put(`/v1/bonuses/${code}`, { label: 'Big', type: 'WelcomeBonus', product: 'Casino', amount, currency, validity_days: 30, wagering_requirement: wagering });
    return { code, response };
  }

  describe('GET /channels/push/status', () => {
    it.each([
      ['an empty push_id', 'push_id=', /push_id "" is not a push id/],
      ['a push_id that is not a UUID', 'push_id=12345', /push_id "12345" is not a push id/],
      ['an empty push_id beside a good one', `push_id=${randomUUID()}&push_id=`, /push_id "" is not a push id/],
    ])('answers 400 to %s', async (_name, query, message) => {
      const response = await h.app.inject({ method: 'GET', url: `/channels/push/status?${query}`, headers: { 'x-api-key': 'test-operator-key' } });
      expectRefused(response, 400, message);
    });
  });

  describe('nesting depth', () => {
    const tooDeep = new RegExp(`meta is nested more than ${MAX_JSON_DEPTH} levels deep`);

    it(`stores a meta nested ${MAX_JSON_DEPTH} levels deep, byte for byte`, async () => {
      const response = await h.single(withRawField(pushRequest(brand, player, { meta: undefined }), 'meta', nested(MAX_JSON_DEPTH)));
      expect(response.statusCode).toBe(200);
      const { rows } = await h.stores.db.pool.query(`SELECT meta::text FROM messages WHERE id = $1`, [response.json().push_id]);
      expect(rows[0].meta).toBe(nested(MAX_JSON_DEPTH));
    });

    it.each([MAX_JSON_DEPTH + 1, 2_000, 10_000, 1_000_000])('answers 400 to a single whose meta nests %i levels', async (levels) => {
      const request = pushRequest(brand, player, { meta: undefined });
      expectRefused(await h.single(withRawField(request, 'meta', nested(levels))), 400, tooDeep);
      expect(await h.messageRows(brand)).toEqual([]);
    });

    it('answers 400 to a field the contract does not list nested too deep, at the top or inside activity', async () => {
      expectRefused(await h.single(withRawField(pushRequest(brand, player), 'extra', nested(10_000))), 400, /extra is nested more than 64 levels/);
      const request = pushRequest(brand, player);
      const text = JSON.stringify(request).replace('"activity":{', `"activity":{"extra":${nested(MAX_JSON_DEPTH + 1)},`);
      expectRefused(await h.single(text), 400, /activity is nested more than 64 levels/);
      expect(await h.messageRows(brand)).toEqual([]);
    });

    it('puts a batch message nested too deep in failed, with the reason, and stores the others', async () => {
      const good = pushRequest(brand, player);
      const deep = pushRequest(brand, player, { meta: undefined });
      const response = await h.batch(`[${JSON.stringify(good)},${withRawField(deep, 'meta', nested(10_000))}]`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        successful: [{ id: good.activity.id, push_id: expect.any(String) }],
        failed: [{ id: deep.activity.id, error: expect.stringMatching(tooDeep) }],
        fatal: [],
      });
      expect((await h.messageRows(brand)).map((m) => Number(m.crmMessageId))).toEqual([good.activity.id]);
    });

    it.each([10_000, 100_000])('answers 400 to a credit with an extra field nested %i levels, and the credits stay listable', async (levels) => {
      const body = `{"user_id":${JSON.stringify(player)},"amount":5,"currency":"EUR","extra":${nested(levels)}}`;
      expectRefused(await h.post('/bonus/credit/funds', body, crmHeaders()), 400, /extra is nested more than 64 levels/);
      const { code } = await createBonus('10.00', 1);
      const bonusBody = `{"user_id":${JSON.stringify(player)},"bonus_code":"${code}","validity_amount":${nested(levels)}}`;
      expectRefused(await h.post('/bonus/credit', bonusBody, crmHeaders()), 400, /validity_amount is nested more than 64 levels/);
      expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
      expect((await h.internal('GET', '/v1/credits?limit=1000')).statusCode).toBe(200);
    });
  });

  describe('one reading of every body: a key given twice', () => {
    it('answers 400 {"error"} to the credit the fuzzer found: bonus_code nested 100,000 levels deep, then given again as text', async () => {
      const { code } = await createBonus('10.00', 1);
      const attack = `{"user_id":${JSON.stringify(player)},"bonus_code":${'['.repeat(100_000)}${']'.repeat(100_000)},"bonus_code":"${code}"}`;
      expectRefused(await h.post('/bonus/credit', attack, crmHeaders()), 400, /bonus_code is nested more than 64 levels deep/);
      // Shallow, the same trick is a key given twice.
      const shallow = `{"user_id":${JSON.stringify(player)},"bonus_code":[[["x"]]],"bonus_code":"${code}"}`;
      expectRefused(await h.post('/bonus/credit', shallow, crmHeaders()), 400, /^bonus_code is given twice$/);
      expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
      expect((await h.internal('GET', '/v1/credits?limit=1000')).statusCode).toBe(200);
    });

    /** `text` with `"key": value` added to the end of the object that opens at `anchor` (its first key, as written). */
    const withMember = (text: string, anchor: string, member: string) => text.replace(anchor, `${member},${anchor}`);

    it.each([
      ['at the top', (text: string) => withMember(text, '"title"', '"title":"first"'), /^title is given twice$/],
      ['in activity', (text: string) => withMember(text, '"brand_id"', '"user_id":"someone-else"'), /^activity\.user_id is given twice$/],
      ['deep in meta', (text: string) => text.replace('"meta":{', '"meta":{"k":[1,{"x":{"y":1,"y":2}}],'), /^meta\.k\[1\]\.x\.y is given twice$/],
      ['written once with escapes', (text: string) => withMember(text, '"title"', '"t\\u0069tle":"first"'), /^title is given twice$/],
    ])('answers 400 naming a key given twice %s in a single push', async (_where, mutate, message) => {
      const request = pushRequest(brand, player);
      expectRefused(await h.single(mutate(JSON.stringify(request))), 400, message);
      expect(await h.messageRows(brand)).toEqual([]);
    });

    it('answers 400 naming a "__proto__" key, given once or twice, or a "constructor" object with "prototype", in a single push', async () => {
      const request = JSON.stringify(pushRequest(brand, player));
      expectRefused(await h.single(request.replace('"meta":{', '"meta":{"__proto__":{"a":1},"__proto__":{"a":2},')), 400, /^meta\.__proto__ is not accepted: no key may be named "__proto__"$/);
      expectRefused(await h.single(request.replace('"meta":{', '"meta":{"x":{"__proto__":{"isAdmin":true}},')), 400, /^meta\.x\.__proto__ is not accepted/);
      expectRefused(await h.single(request.replace('"meta":{', '"meta":{"constructor":{"prototype":{"isAdmin":true}},')), 400, /"constructor" object may have a "prototype" key/);
      expect(await h.messageRows(brand)).toEqual([]);
    });

    it('puts a batch message with a "__proto__" key or a "constructor" object with "prototype" in failed, with the reason, and stores the others', async () => {
      const [first, proto, ctor, last] = [pushRequest(brand, player), pushRequest(brand, player), pushRequest(brand, player), pushRequest(brand, player)];
      const protoText = JSON.stringify(proto).replace('"meta":{', '"meta":{"x":[{"__proto__":{"isAdmin":true}}],');
      const ctorText = JSON.stringify(ctor).replace('"meta":{', '"meta":{"constructor":{"prototype":{"isAdmin":true}},');
      const response = await h.batch(`[${JSON.stringify(first)},${protoText},${ctorText},${JSON.stringify(last)}]`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        successful: [
          { id: first.activity.id, push_id: expect.any(String) },
          { id: last.activity.id, push_id: expect.any(String) },
        ],
        failed: [
          { id: proto.activity.id, error: 'message 1: meta.x[0].__proto__ is not accepted: no key may be named "__proto__"' },
          { id: ctor.activity.id, error: 'message 2: meta.constructor.prototype is not accepted: no "constructor" object may have a "prototype" key' },
        ],
        fatal: [],
      });
      expect((await h.messageRows(brand)).map((m) => Number(m.crmMessageId)).sort()).toEqual([first.activity.id, last.activity.id].sort());
      // Nothing reached a prototype.
      expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
      // A batch of one such message alone is answered the same way; a body that is not an array is refused whole.
      const alone = await h.batch(`[${protoText}]`);
      expect(alone.json()).toMatchObject({ successful: [], failed: [{ id: proto.activity.id }] });
      expect((await h.batch(protoText)).statusCode).toBe(400);
    });

    it('puts a batch message with a key given twice in failed, with the reason, and stores the others', async () => {
      const [first, twice, last] = [pushRequest(brand, player), pushRequest(brand, player), pushRequest(brand, player)];
      const bad = JSON.stringify(twice).replace('"meta":{', '"meta":{"k":{"x":1,"x":2},');
      const response = await h.batch(`[${JSON.stringify(first)},${bad},${JSON.stringify(last)}]`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        successful: [
          { id: first.activity.id, push_id: expect.any(String) },
          { id: last.activity.id, push_id: expect.any(String) },
        ],
        failed: [{ id: twice.activity.id, error: 'message 1: meta.k.x is given twice' }],
        fatal: [],
      });
      expect((await h.messageRows(brand)).map((m) => Number(m.crmMessageId)).sort()).toEqual([first.activity.id, last.activity.id].sort());
    });

    it('answers 400 naming a key given twice in either credit, at the top or deep in an extra field', async () => {
      const { code } = await createBonus('10.00', 1);
      const user = JSON.stringify(player);
      expectRefused(await h.post('/bonus/credit', `{"user_id":${user},"bonus_code":"${code}","validity_amount":{"a":[{"b":1,"b":2}]}}`, crmHeaders()), 400, /^validity_amount\.a\[0\]\.b is given twice$/);
      expectRefused(await h.post('/bonus/credit/funds', `{"user_id":${user},"amount":5,"currency":"EUR","amount":5000}`, crmHeaders()), 400, /^amount is given twice$/);
      expectRefused(await h.post('/bonus/credit/funds', `{"user_id":${user},"amount":5,"currency":"EUR","extra":{"x":{"y":[],"y":{}}}}`, crmHeaders()), 400, /^extra\.x\.y is given twice$/);
      expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
    });

    it('answers 400 naming a key given twice in a device registration', async () => {
      const subscription = { endpoint: 'https://fcm.googleapis.com/fcm/send/abc', keys: { p256dh: 'B'.repeat(87), auth: 'A'.repeat(22) } };
      const webpush = JSON.stringify({ user_id: player, brand_id: brand, provider: 'webpush', subscription }).replace('"auth":', '"auth":"B","auth":');
      const token = `{"user_id":${JSON.stringify(player)},"brand_id":${brand},"provider":"fcm","token":"${fcmToken()}","token":"${fcmToken()}"}`;
      for (const [body, message] of [
        [webpush, /^subscription\.keys\.auth is given twice$/],
        [token, /^token is given twice$/],
      ] as const) {
        const response = await h.app.inject({ method: 'POST', url: '/v1/devices', headers: { 'x-api-key': INTERNAL_KEY, 'content-type': 'application/json' }, payload: body });
        expectRefused(response, 400, message);
      }
      expect(await h.stores.db.device.count({ where: { brandId: BigInt(brand), userId: player } })).toBe(1);
    });
  });

  describe('CRM headers', () => {
    // Node reads header bytes as latin1: each byte over 0x7f is a character of two UTF-8 bytes.
    // Random, so PostgreSQL cannot compress them into an index entry.
    const latin1 = (bytes: number) => Array.from({ length: bytes / 2 }, () => String.fromCharCode(randomInt(0xc0, 0x100))).join('');

    it('answers 400, not 500, to the three headers of the tuple key at 512 non-ASCII characters each', async () => {
      const headers = crmHeaders({ 'X-Service-Activityid': latin1(1024), 'X-Service-Actionid': latin1(1024), 'X-Service-Triggerhash': latin1(1024) });
      const { code } = await createBonus('10.00', 1);
      expectRefused(await h.post('/bonus/credit', { user_id: player, bonus_code: code }, headers), 400, /X-Service-Activityid header must be at most 512 bytes/);
      expectRefused(await h.post('/bonus/credit/funds', { user_id: player, amount: 5, currency: 'EUR' }, headers), 400, /X-Service-Activityid header/);
      expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
    });

    it.each(['X-Service-Activityid', 'X-Service-Actionid', 'X-Service-Triggerhash', 'X-Service-Id'])(
      'answers 400 naming %s when it is over the byte limit, on both credit routes and the push routes',
      async (header) => {
        const headers = crmHeaders({ [header]: latin1(MAX_CRM_HEADER_BYTES + 2) });
        const message = new RegExp(`${header} header must be at most ${MAX_CRM_HEADER_BYTES} bytes`);
        const { code } = await createBonus('10.00', 1);
        expectRefused(await h.post('/bonus/credit', { user_id: player, bonus_code: code }, headers), 400, message);
        expectRefused(await h.post('/bonus/credit/funds', { user_id: player, amount: 5, currency: 'EUR' }, headers), 400, message);
        expectRefused(await h.single(pushRequest(brand, player), headers), 400, message);
        expectRefused(await h.batch([pushRequest(brand, player)], headers), 400, message);
        expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
        expect(await h.messageRows(brand)).toEqual([]);
      },
    );

    it('stores a credit whose headers and user_id are each at their limit, and deduplicates it by the tuple', async () => {
      const userId = `${'\u{1F600}'.repeat(127)}x`; // 255 UTF-16 characters, 509 bytes
      const [activity, action, trigger] = [latin1(MAX_CRM_HEADER_BYTES), latin1(MAX_CRM_HEADER_BYTES), latin1(MAX_CRM_HEADER_BYTES)];
      const headers = crmHeaders({ 'X-Service-Activityid': activity, 'X-Service-Actionid': action, 'X-Service-Triggerhash': trigger });
      const body = { user_id: userId, amount: 5, currency: 'EUR' };
      const first = await h.post('/bonus/credit/funds', body, headers);
      expect(first.statusCode).toBe(200);
      const credit = await getCredit(h.stores.db.pool, first.json().credit_id);
      expect(credit).toMatchObject({ userId, crmHeaders: { activity_id: activity, action_id: action, trigger_hash: trigger } });
      expect(credit!.tupleKey).toMatch(/^[0-9a-f]{64}$/);
      // Another X-Service-Id, the same activity, action, player and trigger: the first credit.
      const again = await h.post('/bonus/credit/funds', body, { ...headers, 'X-Service-Id': uniqueName('svc') });
      expect(again.json()).toEqual(first.json());
    });
  });

  describe('device registration', () => {
    const register = (body: unknown) => h.internal('POST', '/v1/devices', body);

    it('answers 400 to a token of 2.8 KB, and to one under the character limit but over the byte limit', async () => {
      const token = randomBytes(2100).toString('base64url'); // 2,800 characters that do not compress
      expectRefused(await register({ user_id: player, brand_id: brand, provider: 'fcm', token }), 400, /token must be at most 2048/);
      expectRefused(await register({ user_id: player, brand_id: brand, provider: 'fcm', token: '\u00e9'.repeat(1100) }), 400, /token must be at most 2048 bytes/);
      const endpoint = `https://push.example.test/${'\u00e9'.repeat(1100)}`;
      const { subscription } = { subscription: { endpoint, keys: { p256dh: 'B'.repeat(87), auth: 'A'.repeat(22) } } };
      expectRefused(await register({ user_id: player, brand_id: brand, provider: 'webpush', subscription }), 400, /subscription\.endpoint must be at most 2048 bytes/);
    });

    it('stores a token of exactly the byte limit', async () => {
      const token = `${randomBytes(1020).toString('hex')}${'\u00e9'.repeat(4)}`; // 2,040 + 8 bytes
      const response = await register({ user_id: player, brand_id: brand, provider: 'fcm', token });
      expect(response.statusCode).toBe(201);
      expect((await h.stores.db.device.findUnique({ where: { id: response.json().id } }))?.token).toBe(token);
    });

    it.each([
      ['user_id', { user_id: '\udc00' }, /user_id must not contain unpaired UTF-16 surrogates/],
      ['token', { token: 'abc\udc00' }, /token must not contain unpaired UTF-16 surrogates/],
      ['token (high surrogate at the end)', { token: 'abc\ud83d' }, /token must not contain unpaired UTF-16 surrogates/],
      ['token (NUL)', { token: 'abc\u0000' }, /token must not contain NUL characters/],
    ])('answers 400 to an unstorable %s', async (_name, fields, message) => {
      const body = { user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken(), ...fields };
      expectRefused(await register(body), 400, message);
      expect(await h.stores.db.device.count({ where: { brandId: BigInt(brand), userId: player } })).toBe(1);
    });
  });

  describe('path parameters', () => {
    it('lists the devices of a player whose user_id is as long as it may be, percent-encoded', async () => {
      const userId = '\u00e9'.repeat(MAX_USER_ID_LENGTH); // 2,295 characters in the path
      await h.registerDevice({ user_id: userId, brand_id: brand, provider: 'fcm', token: fcmToken() });
      const response = await h.internal('GET', `/v1/players/${encodeURIComponent(userId)}/devices?brand_id=${brand}`);
      expect(response.statusCode).toBe(200);
      expect(response.json().devices).toEqual([expect.objectContaining({ user_id: userId })]);
    });

    it('answers a parameter longer than that, or not valid percent-encoding, with a 4xx {"error"}', async () => {
      expectRefused(await h.internal('GET', `/v1/players/${'x'.repeat(3000)}/wallet`), 414, /path parameter is longer than 2295 characters/);
      expectRefused(await h.internal('GET', '/v1/players/%E0%A4%A/wallet'), 400, /not a valid url component/);
    });
  });

  describe('unstorable text in a push', () => {
    it.each([
      ['title', (r: any) => ({ ...r, title: 'hi \udc00' }), /title must not contain unpaired/],
      ['body', (r: any) => ({ ...r, body: 'a\u0000b' }), /body must not contain NUL/],
      ['activity.user_id', (r: any) => ({ ...r, activity: { ...r.activity, user_id: '\ud800' } }), /activity\.user_id must not contain unpaired/],
      ['a meta string', (r: any) => ({ ...r, meta: { a: [1, { b: 'x\udc00' }] } }), /meta\.a\[1\]\.b must not contain unpaired/],
      ['a meta key', (r: any) => ({ ...r, meta: { 'k\u0000': 1 } }), /meta field names must not contain NUL/],
      ['an android string', (r: any) => ({ ...r, android: { tag: '\udfff' } }), /android\.tag must not contain unpaired/],
      ['an unknown field', (r: any) => ({ ...r, extra: ['\udc00'] }), /extra\[0\] must not contain unpaired/],
    ])('answers 400 naming %s, in a single and in a batch', async (_name, mutate, message) => {
      const request = mutate(pushRequest(brand, player));
      expectRefused(await h.single(request), 400, message);
      const batch = await h.batch([request]);
      expect(batch.json()).toEqual({ successful: [], failed: [{ id: request.activity.id, error: expect.stringMatching(message) }], fatal: [] });
      expect(await h.messageRows(brand)).toEqual([]);
    });

    it('stores paired surrogates (emoji) everywhere, exactly as sent', async () => {
      const request = pushRequest(brand, player, { title: '\u{1F600} hi', meta: { '\u{1F3B0}': '\u{1F4B0}' } });
      const response = await h.single(request);
      expect(response.statusCode).toBe(200);
      const { rows } = await h.stores.db.pool.query(`SELECT payload->>'title' AS title, meta::text FROM messages WHERE id = $1`, [response.json().push_id]);
      expect(rows[0]).toEqual({ title: '\u{1F600} hi', meta: JSON.stringify(request.meta) });
    });
  });

  describe('money', () => {
    it('refuses a catalog bonus over the largest amount, and a wagering requirement over the largest multiple', async () => {
      expectRefused((await createBonus('999999999999999.99', 100)).response, 400, /amount must be at most 1000000000000\.00 EUR/);
      expectRefused((await createBonus('10.00', 10_001)).response, 400, /wagering_requirement must be at most 10000/);
      expectRefused((await createBonus('100000000000001', 1, 'JPY')).response, 400, /amount must be at most 100000000000000 JPY/);
    });

    it('refuses a credit of more than the largest amount on both routes', async () => {
      const { code } = await createBonus('10.00', 1);
      const text = `{"user_id":${JSON.stringify(player)},"bonus_code":"${code}","amount":999999999999999.99}`;
      expectRefused(await h.post('/bonus/credit', text, crmHeaders()), 400, /amount must be at most 1000000000000\.00 EUR/);
      expectRefused(await h.post('/bonus/credit/funds', { user_id: player, amount: '1000000000000.01', currency: 'EUR' }, crmHeaders()), 400, /amount must be at most/);
      expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
    });

    it('answers 422 to a credit of a catalog bonus stored before the bounds, instead of accepting one that cannot be carried out', async () => {
      const code = uniqueName('legacy');
      await h.stores.db.pool.query(
        `INSERT INTO bonuses (code, label, type, product, amount_minor, currency, validity_days, wagering_requirement) VALUES ($1, 'Legacy', 'WelcomeBonus', 'Casino', $2, 'EUR', 30, $3)`,
        [code, '99999999999999999', '100.00'],
      );
      expectRefused(await h.post('/bonus/credit', { user_id: player, bonus_code: code }, crmHeaders()), 422, /largest amount/);
      expect(await h.stores.db.credit.count({ where: { userId: player } })).toBe(0);
    });

    it('carries out the largest bonus with the largest wagering requirement', async () => {
      const { code, response } = await createBonus('1000000000000.00', 10_000);
      expect(response.statusCode).toBe(201);
      const credit = await h.post('/bonus/credit', { user_id: player, bonus_code: code }, crmHeaders());
      expect(credit.statusCode).toBe(200);
      const row = await getCredit(h.stores.db.pool, credit.json().credit_id);
      expect(await processCredit(createBonusDeps(h.stores.db, h.stores.config, silentLogger), row!)).toBe('completed');
      const bonuses = (await h.internal('GET', `/v1/players/${player}/bonuses`)).json().bonuses;
      expect(bonuses).toEqual([expect.objectContaining({ amount: '1000000000000.00', required_wagering_amount: '10000000000000000.00' })]);
    });

    it('keeps balances past the range of bigint (the house side of many large credits)', async () => {
      // XTS: the ISO 4217 code reserved for tests, so no other test's house account moves.
      const entry = 9_000_000_000_000_000_000n;
      for (let i = 0; i < 3; i++) {
        await postTransaction(h.stores.db.pool, '0', randomUUID(), 'test-large', [
          { owner: 'house', currency: 'XTS', kind: 'house', amountMinor: -entry },
          { owner: player, currency: 'XTS', kind: 'real_money', amountMinor: entry },
        ]);
      }
      expect(await playerAccounts(h.stores.db.pool, null, player, 'XTS')).toEqual([{ brandId: '0', currency: 'XTS', kind: 'real_money', balanceMinor: 3n * entry }]);
      const { rows } = await h.stores.db.pool.query(`SELECT balance_minor::text AS b FROM accounts WHERE brand_id = 0 AND owner = 'house' AND currency = 'XTS'`);
      expect(BigInt(rows[0].b)).toBeLessThanOrEqual(-3n * entry);
    });
  });

  describe('a request without Host', () => {
    /** Sends `request` over a real socket and answers the status line and body of the response. */
    let port: number;
    beforeAll(async () => {
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      port = (h.app.server.address() as AddressInfo).port;
    });

    async function raw(request: string): Promise<{ status: number; body: string }> {
      const text = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
        let received = '';
        socket.on('data', (chunk) => (received += chunk.toString('latin1')));
        socket.on('end', () => resolve(received));
        socket.on('error', reject);
      });
      const [head, ...rest] = text.split('\r\n\r\n');
      return { status: Number(head.split(' ')[1]), body: rest.join('\r\n\r\n') };
    }

    it('gets 400 with a JSON error over HTTP/1.1, on any route', async () => {
      for (const path of ['/health/live', '/channels/push/single', '/nowhere']) {
        const response = await raw(`GET ${path} HTTP/1.1\r\nConnection: close\r\n\r\n`);
        expect(response.status).toBe(400);
        expect(JSON.parse(response.body)).toEqual({ error: expect.stringMatching(/Host header is required/), code: 400 });
      }
    });

    it('is answered as usual over HTTP/1.0, which has no Host header', async () => {
      const response = await raw('GET /health/live HTTP/1.0\r\n\r\n');
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toEqual({ status: 'ok' });
    });
  });
});
