import { Type } from '@sinclair/typebox';
import { MAX_JSON_DEPTH } from './limits';
import { checkPushRequest, compileChecker, describeErrors, dropNulls, fieldName, typeboxValidatorCompiler, ValidationError } from './validation';

/** A push request with every field of contract 2.1 to 2.5 filled in. */
function fullRequest(): Record<string, any> {
  return {
    activity: {
      id: 1001,
      brand_id: 7,
      user_id: 'player-42',
      activity_id: 55,
      action_group_id: 66,
      trigger_hash: 'a1b2c3d4',
      action_id: 77,
      origin: 'campaign-spring',
    },
    title: 'Spring bonus',
    body: 'Your free spins are waiting',
    image_url: 'https://cdn.example.com/spring.png',
    android: {
      priority: 'high',
      ttl: '3600s',
      collapse_key: 'spring',
      restricted_package_name: 'com.example.casino',
      icon: 'ic_notification',
      color_rgb: '#ff8800',
      sound: 'default',
      tag: 'spring-tag',
      click_action: 'OPEN_BONUS',
      body_loc_key: 'bonus_body',
      body_loc_arcs: ['10', 'spins'],
      title_loc_keys: 'bonus_title',
      title_loc_args: ['Spring'],
      channel_id: 'promotions',
    },
    ios: {
      badge: '3',
      category: 'BONUS',
      thread_id: 'bonus-thread',
      sub_title: 'Limited time',
      loc_key: 'bonus_body',
      loc_args: ['10', 'spins'],
      title_loc_key: 'bonus_title',
      title_loc_args: ['Spring'],
      sub_title_loc_key: 'bonus_sub',
      sub_title_loc_args: ['today'],
      action_loc_key: 'PLAY',
      launch_image: 'launch.png',
    },
    web: {
      icon: 'https://cdn.example.com/icon.png',
      badge: 'https://cdn.example.com/badge.png',
      dir: 'rtl',
      lang: 'he-IL',
      renotify: 'true',
      require_interaction: 'false',
      silent: 'false',
      tag: 'spring-web',
      timestamp: 1700000000,
      vibrate: ['200', '100', '200'],
      link: 'https://casino.example.com/bonus',
    },
    meta: { campaign: 'spring', segment: { tier: 'gold' }, weights: [1, 2, 3] },
  };
}

function errorOf(value: unknown): string {
  const result = checkPushRequest(value);
  if (result.ok) throw new Error(`expected a validation error, got ok for ${JSON.stringify(value)}`);
  return result.error;
}

describe('checkPushRequest: valid requests', () => {
  it('accepts a request with every field of contract 2.1-2.5 and returns all of it', () => {
    const input = fullRequest();
    const result = checkPushRequest(input);
    expect(result).toEqual({ ok: true, value: input });
  });

  it('keeps android.body_loc_arcs and android.title_loc_keys under their contract names', () => {
    const result = checkPushRequest(fullRequest());
    if (!result.ok) throw new Error(result.error);
    expect(result.value.android?.body_loc_arcs).toEqual(['10', 'spins']);
    expect(result.value.android?.title_loc_keys).toBe('bonus_title');
  });

  it('accepts the required fields only', () => {
    const { activity, title, body } = fullRequest();
    const { origin: _origin, ...requiredActivity } = activity;
    const input = { activity: requiredActivity, title, body };
    expect(checkPushRequest(input)).toEqual({ ok: true, value: input });
  });

  it('keeps unknown fields at the top level and inside activity, android, ios and web', () => {
    const input = fullRequest();
    input.future_top = { nested: [1, 'two'] };
    input.activity.segment_id = 12;
    input.android.visibility = 'public';
    input.ios.interruption_level = 'time-sensitive';
    input.web.actions = [{ action: 'open', title: 'Open' }];
    const result = checkPushRequest(input);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const value = result.value as Record<string, any>;
    expect(value.future_top).toEqual({ nested: [1, 'two'] });
    expect(value.activity.segment_id).toBe(12);
    expect(value.android.visibility).toBe('public');
    expect(value.ios.interruption_level).toBe('time-sensitive');
    expect(value.web.actions).toEqual([{ action: 'open', title: 'Open' }]);
    expect(value).toEqual(input);
  });

  it('accepts empty title and body strings and the extreme allowed ids', () => {
    const input = fullRequest();
    input.title = '';
    input.body = '';
    input.activity.id = Number.MAX_SAFE_INTEGER;
    input.activity.brand_id = 0;
    expect(checkPushRequest(input).ok).toBe(true);
  });

  it('accepts each allowed web.dir value', () => {
    for (const dir of ['ltr', 'rtl', 'auto']) {
      const input = fullRequest();
      input.web.dir = dir;
      expect(checkPushRequest(input).ok).toBe(true);
    }
  });

  it('does not modify the request it is given', () => {
    const input = fullRequest();
    input.image_url = null;
    input.web.dir = null;
    const snapshot = JSON.parse(JSON.stringify(input));
    checkPushRequest(input);
    expect(input).toEqual(snapshot);
  });
});

describe('checkPushRequest: null means absent', () => {
  it.each([
    ['image_url', (r: Record<string, any>) => (r.image_url = null)],
    ['android', (r: Record<string, any>) => (r.android = null)],
    ['ios', (r: Record<string, any>) => (r.ios = null)],
    ['web', (r: Record<string, any>) => (r.web = null)],
    ['meta', (r: Record<string, any>) => (r.meta = null)],
    ['activity.origin', (r: Record<string, any>) => (r.activity.origin = null)],
    ['web.dir', (r: Record<string, any>) => (r.web.dir = null)],
    ['web.timestamp', (r: Record<string, any>) => (r.web.timestamp = null)],
    ['android.body_loc_arcs', (r: Record<string, any>) => (r.android.body_loc_arcs = null)],
  ])('accepts %s: null and leaves the field out', (path, setNull) => {
    const input = fullRequest();
    setNull(input);
    const result = checkPushRequest(input);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const [head, tail] = path.split('.');
    const value = result.value as Record<string, any>;
    if (tail) {
      expect(value[head]).toBeDefined();
      expect(tail in value[head]).toBe(false);
    } else {
      expect(head in value).toBe(false);
    }
  });

  it('accepts web: {dir: null} as an empty web object', () => {
    const { activity, title, body } = fullRequest();
    const result = checkPushRequest({ activity, title, body, web: { dir: null } });
    expect(result).toEqual({ ok: true, value: { activity, title, body, web: {} } });
  });

  it('treats title: null as a missing required field', () => {
    const input = fullRequest();
    input.title = null;
    expect(errorOf(input)).toBe('title is required');
  });

  it('treats activity.user_id: null as a missing required field', () => {
    const input = fullRequest();
    input.activity.user_id = null;
    expect(errorOf(input)).toBe('activity.user_id is required');
  });
});

describe('checkPushRequest: errors name the field', () => {
  it('reports a missing required activity field', () => {
    const input = fullRequest();
    delete input.activity.user_id;
    expect(errorOf(input)).toBe('activity.user_id is required');
  });

  it('reports a missing activity object', () => {
    const input = fullRequest();
    delete input.activity;
    expect(errorOf(input)).toBe('activity is required');
  });

  it('reports missing title and body together', () => {
    const { activity } = fullRequest();
    const error = errorOf({ activity });
    expect(error).toContain('title is required');
    expect(error).toContain('body is required');
  });

  it.each([['12'], [1.5], [true]])('reports activity.id = %p as not an integer', (id) => {
    const input = fullRequest();
    input.activity.id = id;
    expect(errorOf(input)).toBe('activity.id must be an integer');
  });

  it('reports a negative activity.brand_id', () => {
    const input = fullRequest();
    input.activity.brand_id = -1;
    expect(errorOf(input)).toBe('activity.brand_id must be at least 0');
  });

  it('reports activity.id above Number.MAX_SAFE_INTEGER', () => {
    const input = fullRequest();
    input.activity.id = Number.MAX_SAFE_INTEGER + 1;
    expect(errorOf(input)).toBe(`activity.id must be at most ${Number.MAX_SAFE_INTEGER}`);
  });

  it('reports a web.dir outside ltr, rtl, auto', () => {
    const input = fullRequest();
    input.web.dir = 'up';
    expect(errorOf(input)).toBe('web.dir must be one of ltr, rtl, auto');
  });

  it.each([['1700000000'], [1.5], [-1]])('reports web.timestamp = %p', (timestamp) => {
    const input = fullRequest();
    input.web.timestamp = timestamp;
    const expected = timestamp === -1 ? 'web.timestamp must be at least 0' : 'web.timestamp must be an integer';
    expect(errorOf(input)).toBe(expected);
  });

  it('reports a number inside android.body_loc_arcs by its index', () => {
    const input = fullRequest();
    input.android.body_loc_arcs = ['10', 5];
    expect(errorOf(input)).toBe('android.body_loc_arcs[1] must be a string');
  });

  it('reports a null inside an array (nulls are only dropped from objects)', () => {
    const input = fullRequest();
    input.ios.loc_args = ['a', 'b', null];
    expect(errorOf(input)).toBe('ios.loc_args[2] must be a string');
  });

  it('reports a string list given as a string', () => {
    const input = fullRequest();
    input.android.title_loc_args = 'Spring';
    expect(errorOf(input)).toBe('android.title_loc_args must be an array');
  });

  it('reports a list with too many items', () => {
    const input = fullRequest();
    input.web.vibrate = Array.from({ length: 65 }, () => '100');
    expect(errorOf(input)).toBe('web.vibrate must have at most 64 items');
  });

  it('reports a title that is too long, and accepts one at the limit', () => {
    const input = fullRequest();
    input.title = 'x'.repeat(1024);
    expect(checkPushRequest(input).ok).toBe(true);
    input.title = 'x'.repeat(1025);
    expect(errorOf(input)).toBe('title must be at most 1024 characters');
  });

  it('reports a meta or an unknown field nested deeper than MAX_JSON_DEPTH, and text the database cannot store', () => {
    let deep: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH; i++) deep = { a: deep };
    expect(checkPushRequest({ ...fullRequest(), meta: deep }).ok).toBe(true);
    expect(errorOf({ ...fullRequest(), meta: { a: deep } })).toBe(`meta is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(errorOf({ ...fullRequest(), extra: [deep] })).toBe(`extra is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(errorOf({ ...fullRequest(), title: 'a\ud800' })).toBe('title must not contain unpaired UTF-16 surrogates');
    expect(errorOf({ ...fullRequest(), meta: { note: 'a\u0000' } })).toBe('meta.note must not contain NUL characters');
  });

  it('reports a body that is too long', () => {
    const input = fullRequest();
    input.body = 'x'.repeat(4097);
    expect(errorOf(input)).toBe('body must be at most 4096 characters');
  });

  it('reports an empty activity.user_id', () => {
    const input = fullRequest();
    input.activity.user_id = '';
    expect(errorOf(input)).toBe('activity.user_id must not be empty');
  });

  it('reports a title that is not a string', () => {
    const input = fullRequest();
    input.title = 42;
    expect(errorOf(input)).toBe('title must be a string');
  });

  it('reports android given as a string', () => {
    const input = fullRequest();
    input.android = 'high';
    expect(errorOf(input)).toBe('android must be an object');
  });

  it('reports meta given as a string', () => {
    const input = fullRequest();
    input.meta = 'campaign=spring';
    expect(errorOf(input)).toMatch(/^meta must be /);
  });

  it.each([['a string', 'hello'], ['a number', 12], ['null', null], ['an array', [fullRequest()]]])(
    'reports a request that is %s as "request must be an object"',
    (_label, value) => {
      expect(errorOf(value)).toBe('request must be an object');
    },
  );

  it('lists several wrong fields in one message, separated by "; "', () => {
    const input = fullRequest();
    input.activity.id = 'x';
    input.web.dir = 'up';
    input.android.body_loc_arcs = [1];
    const error = errorOf(input);
    expect(error.split('; ')).toEqual(
      expect.arrayContaining(['activity.id must be an integer', 'web.dir must be one of ltr, rtl, auto', 'android.body_loc_arcs[0] must be a string']),
    );
    expect(error.split('; ')).toHaveLength(3);
  });

  it('lists at most five fields', () => {
    const error = errorOf({ activity: {}, title: 1, body: 2 });
    expect(error.split('; ')).toHaveLength(5);
  });
});

describe('fieldName', () => {
  it.each([
    ['', ''],
    ['/title', 'title'],
    ['/activity/id', 'activity.id'],
    ['/android/body_loc_arcs/2', 'android.body_loc_arcs[2]'],
    ['/meta/a~1b', 'meta.a/b'],
    ['/meta/a~0b', 'meta.a~b'],
    ['/meta/~01', 'meta.~1'],
    ['/list/0/name', 'list[0].name'],
  ])('turns %p into %p', (pointer, name) => {
    expect(fieldName(pointer)).toBe(name);
  });
});

describe('dropNulls', () => {
  it('returns a request without nulls as it is, and never changes the one it is given', () => {
    const plain = { title: 't', activity: { id: 1 }, android: { tag: 'x' }, meta: { a: null } };
    expect(dropNulls(plain)).toBe(plain);
    const nested = { title: 't', activity: { id: 1, origin: null } };
    expect(dropNulls(nested)).toEqual({ title: 't', activity: { id: 1 } });
    expect(nested).toEqual({ title: 't', activity: { id: 1, origin: null } });
  });

  it('drops null-valued fields of the request and of activity, android, ios and web', () => {
    expect(
      dropNulls({ a: null, b: 1, activity: { id: 1, origin: null }, android: { tag: null }, ios: null, web: { dir: null, tag: 't' } }),
    ).toEqual({ b: 1, activity: { id: 1 }, android: {}, web: { tag: 't' } });
  });

  it('keeps meta exactly as sent, nulls included', () => {
    const meta = { a: null, nested: { b: null, c: [null, 1] } };
    expect(dropNulls({ title: 't', meta })).toEqual({ title: 't', meta: { a: null, nested: { b: null, c: [null, 1] } } });
  });

  it('drops meta itself when it is null', () => {
    expect(dropNulls({ title: 't', meta: null })).toEqual({ title: 't' });
  });

  it('keeps unknown objects as sent', () => {
    expect(dropNulls({ extra: { x: null } })).toEqual({ extra: { x: null } });
  });

  it('keeps falsy values that are not null', () => {
    expect(dropNulls({ a: 0, b: '', c: false, d: undefined })).toEqual({ a: 0, b: '', c: false, d: undefined });
  });

  it('returns anything that is not an object unchanged', () => {
    expect(dropNulls(null)).toBeNull();
    expect(dropNulls('text')).toBe('text');
    expect(dropNulls(3)).toBe(3);
    expect(dropNulls(undefined)).toBeUndefined();
    const list = [null, { a: null }];
    expect(dropNulls(list)).toBe(list);
  });

  it('returns a copy and leaves the input alone', () => {
    const input = { a: null, web: { dir: null } };
    const output = dropNulls(input);
    expect(output).not.toBe(input);
    expect(input).toEqual({ a: null, web: { dir: null } });
  });
});

describe('describeErrors', () => {
  it('names each path once, keeping the first message for it', () => {
    const text = describeErrors([
      { path: '/activity/id', message: 'is required' },
      { path: '/activity/id', message: 'must be an integer' },
      { path: '/title', message: 'must be a string' },
    ]);
    expect(text).toBe('activity.id is required; title must be a string');
  });

  it('stops after the limit of distinct paths', () => {
    const errors = ['/a', '/a', '/b', '/c', '/d'].map((path) => ({ path, message: 'is wrong' }));
    expect(describeErrors(errors, 2)).toBe('a is wrong; b is wrong');
  });

  it('defaults to five paths', () => {
    const errors = Array.from({ length: 8 }, (_, i) => ({ path: `/f${i}`, message: 'is wrong' }));
    expect(describeErrors(errors).split('; ')).toEqual(['f0', 'f1', 'f2', 'f3', 'f4'].map((f) => `${f} is wrong`));
  });

  it('calls the root path "request"', () => {
    expect(describeErrors([{ path: '', message: 'must be an object' }])).toBe('request must be an object');
  });

  it('gives an empty string for no errors', () => {
    expect(describeErrors([])).toBe('');
  });

  it('reads from any iterable, lazily up to the limit', () => {
    let produced = 0;
    function* errors() {
      for (let i = 0; i < 100; i++) {
        produced++;
        yield { path: `/f${i}`, message: 'is wrong' };
      }
    }
    expect(describeErrors(errors(), 3)).toBe('f0 is wrong; f1 is wrong; f2 is wrong');
    expect(produced).toBe(3);
  });
});

describe('compileChecker and typeboxValidatorCompiler', () => {
  const schema = Type.Object({ n: Type.Integer({ minimum: 1 }), s: Type.Optional(Type.String({ minLength: 3 })) });

  it('returns the value when it matches', () => {
    const check = compileChecker(schema);
    expect(check({ n: 2 })).toEqual({ ok: true, value: { n: 2 } });
  });

  it('does not drop nulls itself (only checkPushRequest does)', () => {
    const check = compileChecker(schema);
    expect(check({ n: 2, s: null })).toEqual({ ok: false, error: 's must be a string' });
  });

  it('words minimum lengths above 1 with the number', () => {
    const check = compileChecker(schema);
    expect(check({ n: 0, s: 'ab' })).toEqual({ ok: false, error: 'n must be at least 1; s must be at least 3 characters' });
  });

  it('gives Fastify a value or a 400 ValidationError with the same wording', () => {
    const validate = typeboxValidatorCompiler({ schema });
    expect(validate({ n: 5 })).toEqual({ value: { n: 5 } });
    const failed = validate({ n: 'five' });
    expect(failed.error).toBeInstanceOf(ValidationError);
    expect(failed.error?.statusCode).toBe(400);
    expect(failed.error?.message).toBe('n must be an integer');
  });
});

describe('typeboxValidatorCompiler on headers and unions', () => {
  it('matches header schemas written in their usual case against the lower-case names Node gives, and names the header', () => {
    const schema = Type.Object({ 'X-Service-Id': Type.String(), 'X-Service-Triggerhash': Type.Optional(Type.String()) });
    const validate = typeboxValidatorCompiler({ schema, httpPart: 'headers' });
    expect(validate({ 'x-service-id': 'svc-1', host: 'localhost' }).error).toBeUndefined();
    expect(validate({ host: 'localhost' }).error?.message).toBe('X-Service-Id header is required');
  });

  it('leaves names of other parts as they are', () => {
    const validate = typeboxValidatorCompiler({ schema: Type.Object({ 'X-Service-Id': Type.String() }), httpPart: 'body' });
    expect(validate({ 'x-service-id': 'svc-1' }).error?.message).toBe('X-Service-Id is required');
  });

  it('words a union that says its own error with it', () => {
    const amount = Type.Union([Type.Number(), Type.String()], { errorMessage: 'must be a decimal number' });
    const check = compileChecker(Type.Object({ amount }));
    expect(check({ amount: true })).toEqual({ ok: false, error: 'amount must be a decimal number' });
    expect(compileChecker(Type.Object({ amount: Type.Union([Type.Number(), Type.String()]) }))({ amount: true })).toEqual({
      ok: false,
      error: 'amount has none of the accepted forms',
    });
  });
});
