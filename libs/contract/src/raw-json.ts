// Finds where a top-level member's value sits in a valid JSON text, so it can be kept byte for byte
// as the client sent it (the CRM's `meta` goes back to it exactly).

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

function skipWhitespace(text: string, at: number): number {
  while (at < text.length && WHITESPACE.has(text[at])) at++;
  return at;
}

function skipString(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  throw new SyntaxError('unterminated string');
}

function skipValue(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return skipString(text, at);
  if (first === '{' || first === '[') {
    let depth = 0;
    for (let i = at; i < text.length; i++) {
      const char = text[i];
      if (char === '"') i = skipString(text, i) - 1;
      else if (char === '{' || char === '[') depth++;
      else if (char === '}' || char === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    throw new SyntaxError('unterminated container');
  }
  let end = at;
  while (end < text.length && !WHITESPACE.has(text[end]) && text[end] !== ',' && text[end] !== '}' && text[end] !== ']') end++;
  return end;
}

/** The last `field` wins, as in JSON.parse; a key is decoded only when it has escapes. */
function member(text: string, at: number, field: string): { value: string | undefined; end: number } {
  const quoted = JSON.stringify(field);
  let value: string | undefined;
  let i = skipWhitespace(text, at + 1);
  if (text[i] === '}') return { value, end: i + 1 };
  for (;;) {
    const keyEnd = skipString(text, i);
    const raw = text.slice(i, keyEnd);
    const matches = raw.includes('\\') ? JSON.parse(raw) === field : raw === quoted;
    i = skipWhitespace(text, keyEnd);
    i = skipWhitespace(text, i + 1); // the colon
    const valueEnd = skipValue(text, i);
    if (matches) value = text.slice(i, valueEnd);
    i = skipWhitespace(text, valueEnd);
    if (text[i] === '}') return { value, end: i + 1 };
    i = skipWhitespace(text, i + 1); // the comma
  }
}

/** For an array: `field`'s raw text in each element that is an object. */
export function rawField(text: string, field: string): string | undefined | (string | undefined)[] {
  const start = skipWhitespace(text, 0);
  if (text[start] === '{') return member(text, start, field).value;
  if (text[start] !== '[') return undefined;
  const values: (string | undefined)[] = [];
  let i = skipWhitespace(text, start + 1);
  if (text[i] === ']') return values;
  for (;;) {
    let end: number;
    if (text[i] === '{') {
      const found = member(text, i, field);
      values.push(found.value);
      end = found.end;
    } else {
      values.push(undefined);
      end = skipValue(text, i);
    }
    i = skipWhitespace(text, end);
    if (text[i] === ']') return values;
    i = skipWhitespace(text, i + 1);
  }
}
