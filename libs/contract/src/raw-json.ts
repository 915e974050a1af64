// Finds where each top-level member's value sits in a JSON text, so a value can be kept byte for
// byte as the client sent it (the CRM's `meta` goes back to it exactly). The text must already be
// valid JSON (it was parsed first); this only measures it.

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

function skipWhitespace(text: string, at: number): number {
  while (at < text.length && WHITESPACE.has(text[at])) at++;
  return at;
}

/** Index just past the string starting at `at` (a double quote). */
function skipString(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  throw new SyntaxError('unterminated string');
}

/** Index just past the value starting at `at`. */
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

/** The raw text of each member of the object starting at `at`, by key (the last one wins, as in JSON.parse). */
function members(text: string, at: number): Map<string, string> {
  const out = new Map<string, string>();
  let i = skipWhitespace(text, at + 1);
  if (text[i] === '}') return out;
  for (;;) {
    const keyEnd = skipString(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipWhitespace(text, keyEnd);
    i = skipWhitespace(text, i + 1); // the colon
    const valueEnd = skipValue(text, i);
    out.set(key, text.slice(i, valueEnd));
    i = skipWhitespace(text, valueEnd);
    if (text[i] === '}') return out;
    i = skipWhitespace(text, i + 1); // the comma
  }
}

/**
 * For a JSON object: the raw text of `field`'s value. For a JSON array: the raw text of `field` in
 * each element that is an object (undefined for others and where the field is absent).
 */
export function rawField(text: string, field: string): string | undefined | (string | undefined)[] {
  const start = skipWhitespace(text, 0);
  if (text[start] === '{') return members(text, start).get(field);
  if (text[start] !== '[') return undefined;
  const values: (string | undefined)[] = [];
  let i = skipWhitespace(text, start + 1);
  if (text[i] === ']') return values;
  for (;;) {
    const end = skipValue(text, i);
    values.push(text[i] === '{' ? members(text, i).get(field) : undefined);
    i = skipWhitespace(text, end);
    if (text[i] === ']') return values;
    i = skipWhitespace(text, i + 1);
  }
}
