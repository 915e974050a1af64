import { rawField } from './raw-json';

describe('rawField', () => {
  it('gives the exact text of a member value of an object', () => {
    const text = '{ "title": "x", "meta" :  { "b" : 1.0, "a": "\\u00e9\\"}", "n": 12345678901234567890 } , "z": [1, {"meta": 2}] }';
    expect(rawField(text, 'meta')).toBe('{ "b" : 1.0, "a": "\\u00e9\\"}", "n": 12345678901234567890 }');
    expect(rawField(text, 'title')).toBe('"x"');
    expect(rawField(text, 'z')).toBe('[1, {"meta": 2}]');
    expect(rawField(text, 'absent')).toBeUndefined();
  });

  it('gives the field of each element of an array', () => {
    const text = '[{"meta": {"k": [1,2]}}, 7, {"title": "no meta"}, {"meta":null}, {"meta": "s,}]"}]';
    expect(rawField(text, 'meta')).toEqual(['{"k": [1,2]}', undefined, undefined, 'null', '"s,}]"']);
  });

  it('takes the last of duplicate keys, as JSON.parse does', () => {
    expect(rawField('{"meta": 1, "meta": {"x": true}}', 'meta')).toBe('{"x": true}');
  });

  it('finds a key written with escapes, and not a key that only starts like it', () => {
    expect(rawField('{"m\\u0065ta": {"a": 1}, "metadata": 2}', 'meta')).toBe('{"a": 1}');
    expect(rawField('[{"metadata": 2}, {"meta\\"": 3}, {"meta": [4]}]', 'meta')).toEqual([undefined, undefined, '[4]']);
  });

  it('handles empty containers and scalars', () => {
    expect(rawField('{}', 'meta')).toBeUndefined();
    expect(rawField('[]', 'meta')).toEqual([]);
    expect(rawField(' "text" ', 'meta')).toBeUndefined();
    expect(rawField('{"meta": {}}', 'meta')).toBe('{}');
  });

  it('keeps values whose strings hold braces, brackets and escaped quotes', () => {
    const meta = '{"a": "}{][\\\\", "b": "\\"{"}';
    expect(rawField(`{"meta": ${meta}, "x": 1}`, 'meta')).toBe(meta);
    expect(JSON.parse(rawField(`{"meta": ${meta}}`, 'meta') as string)).toEqual({ a: '}{][\\', b: '"{' });
  });
});
