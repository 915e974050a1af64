import { MAX_JSON_DEPTH } from './limits';

// What JSON.parse lets through silently: a key written twice (the checks would read one value,
// PostgreSQL the other), nesting past MAX_JSON_DEPTH, and the keys secure-json-parse refuses.
// The text is valid JSON already; it is read once, without recursion.

export interface JsonTextProblems {
  problem: string | null;
  /** For an array: each item's first problem, so one item can be refused alone. */
  items: Map<number, string>;
  /**
   * With a field asked for: its value's text as written, in an object (undefined when absent), or
   * in each item of an array; read in the same pass. Not read in a document or item with a problem.
   */
  raw?: string | undefined | (string | undefined)[];
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Keys an object holds before they are looked up in a Set rather than one by one. */
const LINEAR_KEYS = 16;

const isWhitespace = (code: number) => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;

function skipWhitespace(text: string, at: number): number {
  while (at < text.length && isWhitespace(text.charCodeAt(at))) at++;
  return at;
}

function scalarEnd(text: string, at: number): number {
  let end = at;
  while (end < text.length) {
    const code = text.charCodeAt(end);
    if (code === COMMA || code === CLOSE_BRACE || code === CLOSE_BRACKET || isWhitespace(code)) break;
    end++;
  }
  return end;
}

function stringAt(text: string, at: number): string {
  let i = at + 1;
  while (text.charCodeAt(i) !== QUOTE) i += text.charCodeAt(i) === BACKSLASH ? 2 : 1;
  return JSON.parse(text.slice(at, i + 1)) as string;
}

/** One reading of one text; its stacks are reused from one item of an array to the next. */
class Reader {
  /** Index of the first backslash after the last string read began (text.length: none). */
  private backslash = -1;
  private escaped = false;
  // One entry per open container, outermost first; an object's keys go into a Set once it has many
  // or one has escapes.
  private readonly isObject: boolean[] = [];
  private readonly position: number[] = [];
  private readonly keyCount: number[] = [];
  private readonly keySet: (Set<string> | undefined)[] = [];
  private readonly keysFrom: number[] = [];
  // Keys not yet in a Set are compared where they lie in the text: nothing is copied out.
  private readonly keyStart: number[] = [];
  private readonly keyEnd: number[] = [];
  // Where a "prototype" key is refused: in the value of a "constructor" key.
  private readonly atConstructor: boolean[] = [];
  private readonly ofConstructor: boolean[] = [];

  constructor(
    readonly text: string,
    private readonly maxDepth: number,
    /** A top-level member whose value's text is kept (see JsonTextProblems.raw). */
    private readonly field?: string,
  ) {}

  closingQuote(at: number): number {
    const { text } = this;
    const quote = text.indexOf('"', at + 1);
    if (quote < 0) throw new SyntaxError('unterminated string');
    if (this.backslash <= at) {
      const found = text.indexOf('\\', at + 1);
      this.backslash = found < 0 ? text.length : found;
    }
    this.escaped = this.backslash < quote;
    if (!this.escaped) return quote;
    for (let i = this.backslash; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) return i;
    }
    throw new SyntaxError('unterminated string');
  }

  private keyIs(start: number, end: number, name: string): boolean {
    if (this.escaped) return stringAt(this.text, start) === name;
    return end - start - 1 === name.length && this.text.startsWith(name, start + 1);
  }

  private prototypeProblem(start: number, end: number, level: number): string | null {
    this.atConstructor[level] = this.keyIs(start, end, 'constructor');
    if (this.keyIs(start, end, '__proto__')) return `${this.pathTo(level)} is not accepted: no key may be named "__proto__"`;
    if (this.ofConstructor[level] && this.keyIs(start, end, 'prototype')) {
      return `${this.pathTo(level)} is not accepted: no "constructor" object may have a "prototype" key`;
    }
    return null;
  }

  /** `meta.a[2].b`, as the validation messages name a field. */
  private pathTo(level: number): string {
    let path = '';
    for (let l = 0; l <= level; l++) {
      path = this.isObject[l] ? (path ? `${path}.${stringAt(this.text, this.position[l])}` : stringAt(this.text, this.position[l])) : `${path}[${this.position[l]}]`;
    }
    return path;
  }

  private isListed(start: number, end: number, from: number, to: number): boolean {
    const { text, keyStart, keyEnd } = this;
    const length = end - start;
    for (let k = from; k < to; k++) {
      if (keyEnd[k] - keyStart[k] !== length) continue;
      const shift = keyStart[k] - start;
      let c = start;
      while (c < end && text.charCodeAt(c) === text.charCodeAt(c + shift)) c++;
      if (c === end) return true;
    }
    return false;
  }

  /** Reads the container at `at`; with `untilProblem`, stops at the first problem (the end is then unknown). */
  container(at: number, untilProblem: boolean): { end: number; problem: string | null; raw?: string } {
    const { text, maxDepth, isObject, position, keyCount, keySet, keysFrom, keyStart, keyEnd } = this;
    let keysTop = 0;
    let level = -1;
    let expectKey = false;
    let problem: string | null = null;
    // Once a problem is found, containers are only counted, to find the end.
    let uncounted = 0;
    // The asked field's value: its text, or where it starts while it is a container still open.
    let raw: string | undefined;
    let rawFrom = -1;

    for (let i = at; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code === QUOTE) {
        const end = this.closingQuote(i);
        if (expectKey && problem === null) {
          expectKey = false;
          const count = keyCount[level];
          let set = keySet[level];
          if (!set && (this.escaped || count + 1 === LINEAR_KEYS)) {
            // Decoded from here on: a key written with escapes may be one written without.
            set = keySet[level] = new Set();
            for (let k = keysFrom[level]; k < keysTop; k++) set.add(text.slice(keyStart[k], keyEnd[k]));
            keysTop = keysFrom[level];
          }
          let seen: boolean;
          if (set) {
            const key = this.escaped ? stringAt(text, i) : text.slice(i + 1, end);
            seen = set.has(key);
            set.add(key);
          } else {
            seen = this.isListed(i + 1, end, keysFrom[level], keysTop);
            keyStart[keysTop] = i + 1;
            keyEnd[keysTop++] = end;
          }
          keyCount[level] = count + 1;
          position[level] = i;
          problem = seen ? `${this.pathTo(level)} is given twice` : this.prototypeProblem(i, end, level);
          if (problem !== null && untilProblem) return { end: -1, problem };
          if (level === 0 && this.field !== undefined && problem === null && this.keyIs(i, end, this.field)) {
            const from = skipWhitespace(text, skipWhitespace(text, end + 1) + 1);
            const first = text.charCodeAt(from);
            if (first === OPEN_BRACE || first === OPEN_BRACKET) rawFrom = from;
            else raw = text.slice(from, first === QUOTE ? this.closingQuote(from) + 1 : scalarEnd(text, from));
          }
        }
        i = end;
      } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
        if (problem !== null) {
          uncounted++;
          continue;
        }
        if (level + 1 > maxDepth) {
          problem = `${isObject[0] ? stringAt(text, position[0]) : 'request'} is nested more than ${maxDepth} levels deep`;
          if (untilProblem) return { end: -1, problem };
          uncounted++;
          continue;
        }
        // An object opened in an object is the value of its key being read.
        this.ofConstructor[level + 1] = code === OPEN_BRACE && level >= 0 && isObject[level] && this.atConstructor[level];
        level++;
        isObject[level] = code === OPEN_BRACE;
        position[level] = 0;
        keyCount[level] = 0;
        keySet[level] = undefined;
        keysFrom[level] = keysTop;
        expectKey = code === OPEN_BRACE;
      } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
        if (uncounted > 0) {
          uncounted--;
          continue;
        }
        if (isObject[level]) keysTop = keysFrom[level];
        level--;
        // A value ended (an empty object ended before any key): a string next is an item, not a key.
        expectKey = false;
        if (level === 0 && rawFrom >= 0) {
          raw = text.slice(rawFrom, i + 1);
          rawFrom = -1;
        }
        if (level < 0) return { end: i + 1, problem, raw };
      } else if (code === COMMA) {
        if (uncounted > 0) continue;
        if (isObject[level]) expectKey = true;
        else position[level]++;
      }
    }
    throw new SyntaxError('unterminated container');
  }
}

/**
 * Each item of an array is read on its own, so a batch's bad message is refused alone. With
 * `field`, its value's text is kept too (the CRM's `meta`, returned byte for byte), in the same pass.
 */
export function checkJsonText(text: string, maxDepth = MAX_JSON_DEPTH, field?: string): JsonTextProblems {
  const items = new Map<number, string>();
  const reader = new Reader(text, maxDepth, field);
  let i = skipWhitespace(text, 0);
  const first = text.charCodeAt(i);
  if (first === OPEN_BRACE) {
    const read = reader.container(i, true);
    return field === undefined ? { problem: read.problem, items } : { problem: read.problem, items, raw: read.raw };
  }
  if (first !== OPEN_BRACKET) return { problem: null, items };
  let problem: string | null = null;
  const raws: (string | undefined)[] = [];
  const done = () => (field === undefined ? { problem, items } : { problem, items, raw: raws });
  i = skipWhitespace(text, i + 1);
  if (text.charCodeAt(i) === CLOSE_BRACKET) return done();
  for (let index = 0; ; index++) {
    const code = text.charCodeAt(i);
    let end: number;
    if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      const read = reader.container(i, false);
      if (read.problem !== null) {
        items.set(index, read.problem);
        problem ??= `item ${index}: ${read.problem}`;
      }
      raws.push(code === OPEN_BRACE && read.problem === null ? read.raw : undefined);
      end = read.end;
    } else {
      raws.push(undefined);
      end = code === QUOTE ? reader.closingQuote(i) + 1 : scalarEnd(text, i);
    }
    i = skipWhitespace(text, end);
    if (text.charCodeAt(i) !== COMMA) return done();
    i = skipWhitespace(text, i + 1);
  }
}
