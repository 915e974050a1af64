import fc from 'fast-check';
import { rawField } from '@operator/contract';
import { fcmToken, INTERNAL_KEY, uniqueBrandId, uniqueId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// The property of the gateway's edge: whatever a client sends is either refused with a 4xx
// {"error", "code"}, or answered 2xx and then in PostgreSQL exactly as sent. Never a 5xx (the CRM retries
// it forever), never a 2xx for something the database altered or could not keep.

/** Mostly a well-formed value, one time in nine a hostile one. */
const mostly = <T, U>(good: fc.Arbitrary<T>, hostile: fc.Arbitrary<U>) => fc.oneof({ arbitrary: good, weight: 8 }, { arbitrary: hostile, weight: 1 });

/** Text of every kind: unicode with lone surrogates and NUL, bytes as Node reads them, long runs. */
const hostileText = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', maxLength: 12 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }), weight: 2 },
  { arbitrary: fc.constantFrom('\u0000', 'a\udc00', '\ud83d', '\u{1F600}', '\uFEFF', ''), weight: 2 },
  { arbitrary: fc.uint8Array({ minLength: 200, maxLength: 3000 }).map((bytes) => Buffer.from(bytes).toString('latin1')), weight: 1 },
);

/** Values nested `levels` deep, around MAX_JSON_DEPTH and far past it. */
/** Well-formed unicode (emoji included) or, one time in nine, hostile text. */
const text = mostly(fc.string({ unit: 'grapheme', maxLength: 12 }), hostileText);

const deep = fc.integer({ min: 0, max: 3000 }).map((levels) => {
  let value: unknown = 'bottom';
  for (let i = 0; i < levels; i++) value = i % 2 ? { k: value } : [value];
  return value;
});

const number = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(2 ** 53, 2 ** 63, 1e308, -1, -0, 0.5, 1e-7, Number.MAX_SAFE_INTEGER));

const json = mostly(fc.jsonValue({ maxDepth: 3 }), fc.oneof(deep, hostileText, number));

/** Field values only JSON text can carry: numbers past a double, escapes of lone surrogates and NUL. */
const rawJson = fc.constantFrom('1e400', '-0', '123456789012345678901234567890', '"\\udc00"', '"\\u0000"', '{"\\ud800":1}', '0.1e-400');

/** CRM headers as Node gives them: latin1 text, sometimes longer than the limit. */
const headerValue = mostly(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f).map((c) => String.fromCharCode(c)), maxLength: 40 }),
  fc.integer({ min: 200, max: 700 }).map((n) => '\u00e9'.repeat(n)),
);
const crmHeaders = fc.record(
  { 'X-Service-Id': headerValue, 'X-Service-Activityid': headerValue, 'X-Service-Actionid': headerValue, 'X-Service-Triggerhash': headerValue },
  { requiredKeys: [] },
);

/** The object's JSON text, with `raw` (JSON text) as one more field when given. */
const withRaw = (value: object, raw: string | undefined) => (raw === undefined ? JSON.stringify(value) : `${JSON.stringify(value).slice(0, -1)},"extra_raw":${raw}}`);

/** The headers as the gateway stores them: keyed by their last word, empty ones left out. */
function storedHeaders(headers: Record<string, string>) {
  const keys: Record<string, string> = { 'X-Service-Id': 'id', 'X-Service-Activityid': 'activity_id', 'X-Service-Actionid': 'action_id', 'X-Service-Triggerhash': 'trigger_hash' };
  return Object.fromEntries(Object.entries(headers).filter(([, value]) => value !== '').map(([name, value]) => [keys[name], value]));
}

/** Each key of a JSON text without whitespace (JSON.stringify's), as written, quotes included, and where it starts. */
function keysOf(text: string): { key: string; at: number }[] {
  const keys: { key: string; at: number }[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== '"') continue;
    let end = i + 1;
    while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
    if (text[end + 1] === ':') keys.push({ key: text.slice(i, end + 1), at: i });
    i = end;
  }
  return keys;
}

/**
 * A hostile edit of a request's JSON text, at one of its keys (any depth): the key given once more
 * before it (`twice`; JSON.parse keeps the later, the kept text both, as in the credit that once
 * reached PostgreSQL as a 500), or a member nested about MAX_JSON_DEPTH levels deep or far past it.
 */
type TextEdit = { kind: 'twice' | 'deep'; at: number; value: string };
const nest = fc.oneof(fc.integer({ min: 55, max: 70 }), fc.constantFrom(1000, 100_000)).map((levels) => `${'['.repeat(levels)}${']'.repeat(levels)}`);
const textEdit: fc.Arbitrary<TextEdit | undefined> = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constantFrom<TextEdit['kind']>('twice', 'deep'), at: fc.nat(), value: fc.oneof(nest, json.map((value) => JSON.stringify(value))) }), weight: 1 },
);

function edited(text: string, edit: TextEdit | undefined): string {
  if (!edit) return text;
  const keys = keysOf(text);
  const { key, at } = keys[edit.at % keys.length];
  return `${text.slice(0, at)}${edit.kind === 'twice' ? key : '"deep_extra"'}:${edit.value},${text.slice(at)}`;
}

/**
 * What a key given twice is answered with: the first problem the one reading of the text finds. The
 * repeated key's value comes first, and a generated value may itself be too deep or carry a
 * `__proto__` key or a `constructor` object's `prototype`.
 */
const TWICE = /is given twice|is nested more than 64 levels deep|is not accepted: no (key may be named "__proto__"|"constructor" object may have a "prototype" key)/;

const RUNS = 200;

describe('every input is stored as sent or refused with a 4xx', () => {
  let h: Harness;
  let brand: number;
  let player: string;

  beforeAll(async () => {
    h = await Harness.open();
    brand = uniqueBrandId();
    player = uniqueName('player');
    await h.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
  });
  afterAll(() => h.close());

  // Answers seen by status class, so a test also shows that it reached both outcomes.
  let seen: { stored: number; refused: number };
  beforeEach(() => {
    seen = { stored: 0, refused: 0 };
  });
  afterEach(() => {
    expect(seen.stored).toBeGreaterThan(RUNS / 10);
    expect(seen.refused).toBeGreaterThan(RUNS / 10);
  });

  /** A 4xx with {"error", "code"}, or a 2xx: anything else fails the property. Answers whether it is a 2xx. */
  function expectStoredOrRefused(response: { statusCode: number; body: string }) {
    if (response.statusCode >= 400) {
      expect({ status: response.statusCode, body: JSON.parse(response.body) }).toEqual({ status: expect.any(Number), body: { error: expect.any(String), code: response.statusCode } });
      expect(response.statusCode).toBeLessThan(500);
      seen.refused++;
      return false;
    }
    expect(response.statusCode).toBeLessThan(300);
    return true;
  }

  function tally(stored: boolean) {
    if (stored) seen.stored++;
    else seen.refused++;
  }

  it('push requests, single and batch', async () => {
    const push = fc.record(
      {
        user_id: mostly(fc.constant(player), text),
        trigger_hash: text,
        origin: text,
        title: text,
        body: text,
        meta: mostly(fc.dictionary(text, json, { maxKeys: 4 }), fc.oneof(deep, json)),
        android: fc.record({ tag: text, body_loc_arcs: fc.array(text, { maxLength: 3 }), extra: json }, { requiredKeys: [] }),
        web: fc.record({ timestamp: mostly(fc.nat(), number), vibrate: fc.array(text, { maxLength: 3 }) }, { requiredKeys: [] }),
        extra: json,
        raw: mostly(fc.constant(undefined), rawJson),
      },
      { requiredKeys: ['user_id', 'title', 'body', 'trigger_hash'] },
    );
    await fc.assert(
      fc.asyncProperty(push, crmHeaders, fc.boolean(), textEdit, async ({ user_id, trigger_hash, origin, raw, ...fields }, headers, asBatch, edit) => {
        const message = { activity: { id: uniqueId(), brand_id: brand, user_id, activity_id: 1, action_group_id: 2, trigger_hash, action_id: 3, origin }, ...fields };
        const payload = edited(withRaw(message, raw), edit);
        const response = asBatch ? await h.batch(`[${payload}]`, headers) : await h.single(payload, headers);
        const twice = edit?.kind === 'twice';
        if (!expectStoredOrRefused(response)) {
          // A batch's headers are checked before its messages: one that cannot be stored refuses the batch.
          if (twice && !asBatch) expect(response.json().error).toMatch(TWICE);
          return;
        }
        let pushId: string = response.json().push_id;
        if (asBatch) {
          // A batch is always 200: each message is in successful or failed, never in fatal.
          const result = response.json();
          expect(result.fatal).toEqual([]);
          if (twice) expect({ successful: result.successful, failed: result.failed.map((entry: { error: string }) => entry.error) }).toEqual({ successful: [], failed: [expect.stringMatching(TWICE)] });
          tally(result.successful.length > 0);
          if (!result.successful.length) return;
          pushId = result.successful[0].push_id;
        } else {
          expect(twice).toBe(false);
          tally(true);
        }
        const rawMeta = rawField(payload, 'meta') as string | undefined;
        const { rows } = await h.stores.db.pool.query(`SELECT user_id, trigger_hash, origin, meta::text AS meta, payload->>'title' AS title, crm_headers FROM messages WHERE id = $1`, [pushId]);
        expect(rows).toEqual([
          {
            user_id,
            trigger_hash,
            origin: origin ?? null,
            meta: rawMeta === undefined || rawMeta === 'null' ? null : rawMeta,
            title: fields.title,
            crm_headers: storedHeaders(headers),
          },
        ]);
      }),
      { numRuns: RUNS },
    );
  });

  it('device registrations', async () => {
    const device = fc.record(
      {
        user_id: mostly(fc.constant(uniqueName('device-player')), text),
        brand_id: mostly(fc.constant(brand), number),
        provider: mostly(fc.constant('fcm'), fc.constantFrom('apns', 'webpush', 'other')),
        platform: mostly(fc.constantFrom('android', undefined), fc.constantFrom('ios', 'web', 'toaster')),
        token: mostly(fc.string({ minLength: 1, maxLength: 200 }), fc.oneof(text, fc.integer({ min: 1000, max: 1100 }).map((n) => 'ab'.repeat(n)), fc.uint8Array({ minLength: 900, maxLength: 1100 }).map((b) => Buffer.from(b).toString('latin1')))),
        extra: json,
      },
      { requiredKeys: ['user_id', 'brand_id', 'provider', 'token'] },
    );
    await fc.assert(
      fc.asyncProperty(device, textEdit, async (body, edit) => {
        const payload = edited(JSON.stringify(body), edit);
        const response = await h.app.inject({ method: 'POST', url: '/v1/devices', headers: { 'x-api-key': INTERNAL_KEY, 'content-type': 'application/json' }, payload });
        if (!expectStoredOrRefused(response)) {
          if (edit?.kind === 'twice') expect(response.json().error).toMatch(TWICE);
          return;
        }
        expect(edit?.kind).not.toBe('twice');
        tally(true);
        const row = await h.stores.db.device.findUnique({ where: { id: response.json().id } });
        expect({ userId: row?.userId, token: row?.token, brandId: row?.brandId }).toEqual({ userId: body.user_id, token: body.token, brandId: BigInt(body.brand_id as number) });
      }),
      { numRuns: RUNS },
    );
  });

  it('bonus credits and funds, with their headers', async () => {
    const code = uniqueName('bonus');
    const created = await h.app.inject({
      method: 'PUT',
      url: `/v1/bonuses/${code}`,
      headers: { 'x-api-key': INTERNAL_KEY, 'content-type': 'application/json' },
      payload: JSON.stringify({ label: 'Property', type: 'FreeSpins', product: 'Casino', amount: '10.00', currency: 'EUR', validity_days: 30, wagering_requirement: 10000 }),
    });
    expect(created.statusCode).toBe(201);
    const amount = mostly(
      fc.oneof(fc.integer({ min: 1, max: 10 ** 6 }), fc.constantFrom('10.50', '1000000000000.00', 0.5)),
      fc.oneof(number, fc.constantFrom('1000000000000.01', '0', '-5', '1e3', '12.345'), fc.bigInt({ min: 1n, max: 10n ** 20n }).map((n) => n.toString())),
    );
    const credit = fc.record(
      {
        user_id: mostly(fc.constant(uniqueName('credit-player')), text),
        bonus_code: mostly(fc.constant(code), text),
        amount,
        currency: mostly(fc.constantFrom('EUR', 'JPY'), fc.constantFrom('BHD', 'eur', 'XXX', 'ZZZ')),
        type: mostly(fc.constantFrom('cashback', 'wheel'), text),
        validity_amount: json,
        raw: mostly(fc.constant(undefined), rawJson),
      },
      { requiredKeys: ['user_id', 'bonus_code', 'amount', 'currency'] },
    );
    // X-Service-Id: unique per run, with a generated tail that is sometimes too long.
    const headers = crmHeaders.map((generated) => ({ ...generated, 'X-Service-Id': `${uniqueName('svc')}${generated['X-Service-Id'] ?? ''}` }));
    // A repeat of the same activity, action, player and trigger hash is answered with the first credit.
    const first = new Map<string, unknown>();
    await fc.assert(
      fc.asyncProperty(credit, headers, fc.constantFrom('/bonus/credit', '/bonus/credit/funds'), textEdit, async ({ raw, ...body }, sent, route, edit) => {
        const payload = edited(withRaw(body, raw), edit);
        const response = await h.post(route, payload, sent);
        if (!expectStoredOrRefused(response)) {
          if (edit?.kind === 'twice') expect(response.json().error).toMatch(TWICE);
          return;
        }
        expect(edit?.kind).not.toBe('twice');
        tally(true);
        const id: string = response.json().credit_id;
        const expected = first.get(id) ?? { user_id: body.user_id, request: payload, crm_headers: storedHeaders(sent) };
        first.set(id, expected);
        const { rows } = await h.stores.db.pool.query(`SELECT user_id, request::text AS request, crm_headers FROM credits WHERE id = $1`, [id]);
        expect(rows).toEqual([expected]);
      }),
      { numRuns: RUNS },
    );
  });
});
