import fc from 'fast-check';
import { checkJsonText } from './json-text';
import { rawField } from './raw-json';
import { MAX_JSON_DEPTH } from './limits';
import { checkStorable } from './storable';

const problem = (text: string, maxDepth?: number) => checkJsonText(text, maxDepth).problem;

/** `levels` arrays nested in each other, as text. */
const arrays = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('checkJsonText', () => {
  it('finds nothing in a document without repeated keys', () => {
    expect(checkJsonText('{"a": 1, "b": {"a": 2, "c": [{"a": 3}, {"a": 4}]}, "c": "a\\"b"}')).toEqual({ problem: null, items: new Map() });
    for (const text of ['{}', '[]', '"text"', ' 12 ', 'null', '[1, "two", {}, []]', '{"": 1, " ": 2}']) expect(problem(text)).toBeNull();
  });

  it('names a key given twice, at any depth, with the path to it', () => {
    expect(problem('{"bonus_code": "a", "user_id": "p", "bonus_code": "b"}')).toBe('bonus_code is given twice');
    expect(problem('{"activity": {"id": 1, "user_id": "p", "id": 2}}')).toBe('activity.id is given twice');
    expect(problem('{"meta": {"a": [1, {"b": {"c": 1, "c": 2}}]}}')).toBe('meta.a[1].b.c is given twice');
  });

  it('tells a key written with escapes from its text, and sees it as the key it stands for', () => {
    expect(problem('{"meta": 1, "m\\u0065ta": 2}')).toBe('meta is given twice');
    expect(problem('{"m\\u0065ta": 1, "meta": 2}')).toBe('meta is given twice');
    expect(problem('{"a\\"": 1, "a": 2, "a\\\\": 3}')).toBeNull();
    expect(problem('{"x": "\\\\", "\\\\": 1, "y": "\\"", "\\\\": 2}')).toBe('\\ is given twice');
  });

  it('does not take a string value for a key', () => {
    expect(problem('{"a": "b", "b": "a", "c": ["a", "a"], "d": {"a": "a"}}')).toBeNull();
  });

  it('does not take an item after an empty object for a key (what the property below found)', () => {
    expect(problem('{"a": {"b": [{}, "a"],"a": 1}}')).toBeNull();
    expect(problem('{"meta": {"tags": [{}, "x", {}, "y"], "x": 1, "y": 2}}')).toBeNull();
    expect(problem('{"a": [{}, "a"], "a": 1}')).toBe('a is given twice');
  });

  it('keeps the keys of each object apart, in objects of any size', () => {
    const many = (n: number, extra = '') => `{${Array.from({ length: n }, (_, i) => `"k${i}": {"k${i}": ${i}}`).join(',')}${extra}}`;
    expect(problem(many(10))).toBeNull();
    expect(problem(many(5000))).toBeNull();
    expect(problem(many(5000, ',"k4321": 0'))).toBe('k4321 is given twice');
    expect(problem(many(15, ',"k3": 0'))).toBe('k3 is given twice');
    expect(problem(many(16, ',"k3": 0'))).toBe('k3 is given twice');
  });

  it(`names the top field of a value nested more than ${MAX_JSON_DEPTH} levels, as checkStorable does`, () => {
    const at = (levels: number) => `{"a": 1, "meta": {"x": ${arrays(levels - 1)}}}`;
    expect(problem(at(MAX_JSON_DEPTH))).toBeNull();
    expect(problem(at(MAX_JSON_DEPTH + 1))).toBe(`meta is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(checkStorable(JSON.parse(at(MAX_JSON_DEPTH + 1)))).toBe(problem(at(MAX_JSON_DEPTH + 1)));
    expect(problem(at(1_000_000))).toBe(`meta is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(problem(`[${arrays(MAX_JSON_DEPTH + 1)}]`)).toBeNull();
    expect(problem(`[${arrays(MAX_JSON_DEPTH + 2)}]`)).toBe(`item 0: request is nested more than ${MAX_JSON_DEPTH} levels deep`);
  });

  it('refuses the attack: a key first nested 100,000 levels deep, then given again as text', () => {
    expect(problem(`{"user_id": "p", "bonus_code": ${arrays(100_000)}, "bonus_code": "WELCOME"}`)).toBe(`bonus_code is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(problem(`{"user_id": "p", "bonus_code": ${arrays(3)}, "bonus_code": "WELCOME"}`)).toBe('bonus_code is given twice');
  });

  it('reads each item of an array as a document of its own, and goes on past a bad one', () => {
    const text = `[{"a": 1}, {"a": 1, "a": 2}, 7, "s", {"b": {"c": ${arrays(70)}, "c": 1}}, {"d": [{"e": 1, "e": 2}]}, {"a": 1}]`;
    expect(checkJsonText(text)).toEqual({
      problem: 'item 1: a is given twice',
      items: new Map([
        [1, 'a is given twice'],
        [4, `b is nested more than ${MAX_JSON_DEPTH} levels deep`],
        [5, 'd[0].e is given twice'],
      ]),
    });
  });

  it('names a "__proto__" key and a "constructor" object with a "prototype" key, as secure-json-parse refuses them, escaped or not', () => {
    expect(problem('{"__proto__": {"isAdmin": true}}')).toBe('__proto__ is not accepted: no key may be named "__proto__"');
    expect(problem('{"meta": {"x": [{"\\u005f_proto__": 1}]}}')).toBe('meta.x[0].__proto__ is not accepted: no key may be named "__proto__"');
    expect(problem('{"meta": {"constructor": {"a": 1, "prototype": {"isAdmin": true}}}}')).toBe(
      'meta.constructor.prototype is not accepted: no "constructor" object may have a "prototype" key',
    );
    expect(problem('{"c\\u006fnstructor": {"prototype": 1}}')).toBe('constructor.prototype is not accepted: no "constructor" object may have a "prototype" key');
    // What secure-json-parse lets through: "prototype" elsewhere, a "constructor" that is not an object.
    for (const text of ['{"prototype": {"constructor": 1}}', '{"constructor": 1, "prototype": 2}', '{"constructor": [{"prototype": 1}]}', '{"constructor": {"x": {"prototype": 1}}}', '{"a": "__proto__"}', '{"__proto": 1, "_proto__": 2}']) {
      expect([text, problem(text)]).toEqual([text, null]);
    }
  });

  it('refuses only the items of an array that hold a prototype key', () => {
    expect(checkJsonText('[{"a": 1}, {"meta": {"__proto__": {"x": 1}}}, {"constructor": {"prototype": {}}}, {"b": 2}]')).toEqual({
      problem: 'item 1: meta.__proto__ is not accepted: no key may be named "__proto__"',
      items: new Map([
        [1, 'meta.__proto__ is not accepted: no key may be named "__proto__"'],
        [2, 'constructor.prototype is not accepted: no "constructor" object may have a "prototype" key'],
      ]),
    });
  });

  it('finds a key given twice in every generated document that has one, and in no other', () => {
    // Each document is generated with whether it has a key given twice: two keys of one object
    // that decode to the same text, each key decoded alone. JSON.parse of the whole document is no
    // oracle: Node 24's, once warm, can keep a wrong key for an object that gives a key twice, one
    // of them written with escapes ({"a": 1, "\u0061": "\\"} read as {"a": 1, "\\": "\\"}).
    type Doc = { text: string; twice: boolean };
    const key = fc.constantFrom('a', 'b', 'ab', 'a\\u0062', '\\u0061', 'é', '\\"', '\\\\');
    const value: fc.Arbitrary<Doc> = fc.letrec<{ value: Doc }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.constantFrom('1', '"a"', '"\\"a"', 'null', '"\\\\"').map((text) => ({ text, twice: false })),
        fc.array(tie('value'), { maxLength: 4 }).map((items) => ({ text: `[${items.map((item) => item.text).join(', ')}]`, twice: items.some((item) => item.twice) })),
        fc.array(fc.tuple(key, tie('value')), { maxLength: 5 }).map((members) => {
          const decoded = members.map(([k]) => JSON.parse(`"${k}"`) as string);
          return {
            text: `{${members.map(([k, v]) => `"${k}": ${v.text}`).join(',')}}`,
            twice: new Set(decoded).size < decoded.length || members.some(([, v]) => v.twice),
          };
        }),
      ),
    })).value;
    fc.assert(
      fc.property(value, ({ text, twice }) => {
        expect(checkJsonText(text, 1000).problem !== null).toBe(twice);
      }),
      { numRuns: 2000 },
    );
  });

  it("keeps a field's value as written, in the same pass, as rawField finds it", () => {
    const text = '{ "title": "x", "meta" :  { "b" : 1.0, "a": "\\u00e9\\"}", "n": 12345678901234567890 } , "z": [1, {"meta": 2}] }';
    expect(checkJsonText(text, 1000, 'meta').raw).toBe('{ "b" : 1.0, "a": "\\u00e9\\"}", "n": 12345678901234567890 }');
    expect(checkJsonText(text, 1000, 'title').raw).toBe('"x"');
    expect(checkJsonText(text, 1000, 'absent').raw).toBeUndefined();
    expect(checkJsonText(text).raw).toBeUndefined();
    const items = '[{"meta": {"k": [1,2]}}, 7, {"title": "no meta"}, {"meta":null}, {"m\\u0065ta": "s,}]"}, [{"meta": 1}], {"meta": 5, "meta": 6}]';
    expect(checkJsonText(items, 1000, 'meta').raw).toEqual(['{"k": [1,2]}', undefined, undefined, 'null', '"s,}]"', undefined, undefined]);
    expect(checkJsonText('[]', 1000, 'meta').raw).toEqual([]);
    expect(checkJsonText('{"meta": {}}', 1000, 'meta').raw).toBe('{}');
  });

  it('keeps the same text as rawField in every generated document without a problem', () => {
    const scalar = fc.constantFrom('1', '-2.50e3', '"a"', '"\\"{[a"', 'null', 'true', '"\\\\"', '12345678901234567890');
    const json: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        scalar,
        fc.array(tie('value'), { maxLength: 4 }).map((items) => `[ ${items.join(' ,')}]`),
        fc.uniqueArray(fc.tuple(fc.constantFrom('a', 'meta', 'metadata', 'm\\u0065ta', 'x\\"'), tie('value')), { maxLength: 4, selector: ([key]) => JSON.parse(`"${key}"`) }).map(
          (members) => `{${members.map(([k, v]) => `"${k}" :${v}`).join(', ')} }`,
        ),
      ),
    })).value;
    fc.assert(
      fc.property(json, (text) => {
        const read = checkJsonText(text, 1000, 'meta');
        if (read.problem === null) expect(read.raw).toEqual(rawField(text, 'meta'));
      }),
      { numRuns: 2000 },
    );
  });
});
