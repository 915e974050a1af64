import { MAX_JSON_DEPTH } from './limits';

// What PostgreSQL cannot store faithfully: a NUL character (text columns refuse it) and a UTF-16
// surrogate without its pair (no UTF-8 encoding exists: the driver would store U+FFFD instead, and
// `json` refuses its \u escape).
const NUL = '\u0000';
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Text without a NUL or any surrogate, nearly all text, is storable: one plain scan tells. */
const SUSPECT = /[\u0000\ud800-\udfff]/;

/** Why `text` cannot be stored as sent, or null when it can. */
export function textProblem(text: string): string | null {
  if (!SUSPECT.test(text)) return null;
  if (text.includes(NUL)) return 'must not contain NUL characters';
  if (LONE_SURROGATE.test(text)) return 'must not contain unpaired UTF-16 surrogates';
  return null;
}

export const isStorableText = (text: string) => textProblem(text) === null;

export const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');

const isContainer = (value: unknown): value is object => value !== null && typeof value === 'object';

const childPath = (path: string, key: string | number) => (typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key);

/** Why a parsed document cannot be stored, naming the field; its own stack, so no input overflows the call stack. */
export function checkStorable(document: unknown, maxDepth = MAX_JSON_DEPTH): string | null {
  if (typeof document === 'string') {
    const problem = textProblem(document);
    return problem && `request ${problem}`;
  }
  const stack: { value: object; depth: number; path: string }[] = isContainer(document) ? [{ value: document, depth: 0, path: '' }] : [];
  while (stack.length) {
    const { value, depth, path } = stack.pop()!;
    if (depth > maxDepth) return `${path.split(/[.[]/, 1)[0]} is nested more than ${maxDepth} levels deep`;
    const containers: { value: object; depth: number; path: string }[] = [];
    // Each member in order, without an array of entries per container.
    const check = (key: string | number, item: unknown): string | null => {
      if (typeof item === 'string') {
        const problem = textProblem(item);
        if (problem) return `${childPath(path, key)} ${problem}`;
      } else if (isContainer(item)) {
        containers.push({ value: item, depth: depth + 1, path: childPath(path, key) });
      }
      return null;
    };
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const problem = check(i, value[i]);
        if (problem) return problem;
      }
    } else {
      for (const key of Object.keys(value)) {
        const keyProblem = textProblem(key);
        if (keyProblem) return `${path || 'request'} field names ${keyProblem}`;
        const problem = check(key, (value as Record<string, unknown>)[key]);
        if (problem) return problem;
      }
    }
    // Reversed, so the stack yields them in document order.
    for (let i = containers.length - 1; i >= 0; i--) stack.push(containers[i]);
  }
  return null;
}
