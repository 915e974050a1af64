import fc from 'fast-check';
import { MAX_JSON_DEPTH } from './limits';
import { checkStorable, isStorableText, textProblem } from './storable';

/** `levels` objects nested in each other, built without recursion: {a: {a: ... 1}}. */
function nestedObject(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe('textProblem', () => {
  it.each(['', 'plain', 'caf\u00e9', '\u{1F600} emoji (a surrogate pair)', '\ud83d\ude00', '\uffff', '\t\n'])('accepts %p', (text) => {
    expect(textProblem(text)).toBeNull();
  });

  it.each([
    ['a NUL', 'a\u0000b', 'must not contain NUL characters'],
    ['a lone low surrogate', '\udc00', 'must not contain unpaired UTF-16 surrogates'],
    ['a lone high surrogate at the end', 'ab\ud83d', 'must not contain unpaired UTF-16 surrogates'],
    ['a high surrogate before a letter', '\ud83dx', 'must not contain unpaired UTF-16 surrogates'],
    ['a pair in the wrong order', '\ude00\ud83d', 'must not contain unpaired UTF-16 surrogates'],
  ])('refuses %s', (_name, text, problem) => {
    expect(textProblem(text)).toBe(problem);
    expect(isStorableText(text)).toBe(false);
  });

  it('agrees with UTF-8: text is storable exactly when it survives the round trip and has no NUL', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 20 }), (text) => {
        const survives = Buffer.from(text, 'utf8').toString('utf8') === text && !text.includes('\u0000');
        expect(isStorableText(text)).toBe(survives);
      }),
      { numRuns: 500 },
    );
  });
});

describe('checkStorable', () => {
  it('accepts ordinary documents and scalars', () => {
    expect(checkStorable({ a: [1, 'two', { three: null, four: true }], '\u{1F3B0}': '\u{1F4B0}' })).toBeNull();
    for (const value of [null, 1, 'text', true, [], {}]) expect(checkStorable(value)).toBeNull();
  });

  it('names the field of an unstorable string, at any depth and in arrays', () => {
    expect(checkStorable({ title: 'a\u0000' })).toBe('title must not contain NUL characters');
    expect(checkStorable({ meta: { list: [1, { deep: '\udc00' }] } })).toBe('meta.list[1].deep must not contain unpaired UTF-16 surrogates');
    expect(checkStorable(['ok', '\ud800'])).toBe('[1] must not contain unpaired UTF-16 surrogates');
    expect(checkStorable('\u0000')).toBe('request must not contain NUL characters');
  });

  it('checks field names too', () => {
    expect(checkStorable({ meta: { 'k\u0000': 1 } })).toBe('meta field names must not contain NUL characters');
    expect(checkStorable({ '\udc00': 1 })).toBe('request field names must not contain unpaired UTF-16 surrogates');
  });

  it(`accepts a field nested ${MAX_JSON_DEPTH} levels deep and refuses one level more, naming the top-level field`, () => {
    expect(checkStorable({ meta: nestedObject(MAX_JSON_DEPTH) })).toBeNull();
    expect(checkStorable({ meta: nestedObject(MAX_JSON_DEPTH + 1) })).toBe(`meta is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(checkStorable({ list: [[[[1]]]] }, 3)).toBe('list is nested more than 3 levels deep');
    expect(checkStorable({ list: [[[1]]] }, 3)).toBeNull();
  });

  it('walks a million levels without running out of stack', () => {
    let deep: unknown[] = [];
    const root = { meta: deep };
    for (let i = 0; i < 1_000_000; i++) {
      const next: unknown[] = [];
      deep.push(next);
      deep = next;
    }
    expect(checkStorable(root)).toBe(`meta is nested more than ${MAX_JSON_DEPTH} levels deep`);
    expect(checkStorable(root, 2_000_000)).toBeNull();
  });

  it('accepts a JSON document exactly when every string and key is storable and no field nests too deep', () => {
    const depthOf = (value: unknown): number =>
      value !== null && typeof value === 'object' ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0;
    const strings = (value: unknown): string[] =>
      typeof value === 'string' ? [value] : value !== null && typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => [k, ...strings(v)]) : [];
    const text = fc.string({ unit: 'binary', maxLength: 6 });
    const json = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.constant(null), fc.integer(), text, fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(text, tie('value'), { maxKeys: 3 })),
    })).value;
    fc.assert(
      fc.property(fc.dictionary(text, json, { maxKeys: 4 }), fc.integer({ min: 0, max: 4 }), (document, maxDepth) => {
        const storable = strings(document).every((s) => Buffer.from(s, 'utf8').toString('utf8') === s && !s.includes('\u0000'));
        const shallow = Object.values(document).every((value) => depthOf(value) <= maxDepth);
        expect(checkStorable(document, maxDepth) === null).toBe(storable && shallow);
      }),
      { numRuns: 500 },
    );
  });
});
