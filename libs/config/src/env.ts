import type { Static, TObject, TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

/** A comma-separated list, empty entries dropped. */
export function splitList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

/** The values a union of string literals allows; undefined for any other schema. */
function literalsOf(field: TSchema): string[] | undefined {
  const values: unknown[] | undefined = (field.anyOf as TSchema[] | undefined)?.map((option) => option.const);
  return values?.every((value): value is string => typeof value === 'string') ? values : undefined;
}

const BOOLEAN_WORDS: Record<string, boolean> = { true: true, '1': true, yes: true, false: false, '0': false, no: false };

/**
 * Reads a schema's variables with defaults and conversions ("false" is false), reporting every
 * problem at once. `alongside`: the caller's own problems, listed with these when it throws.
 */
export function parseEnv<T extends TObject>(schema: T, env: Env, alongside: readonly string[] = []): Static<T> {
  const raw: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, field] of Object.entries(schema.properties) as [string, TSchema][]) {
    const text = env[name];
    if (text === undefined || text === '') continue;
    if (field.type === 'boolean') {
      const word = BOOLEAN_WORDS[text.trim().toLowerCase()];
      if (word === undefined) problems.push(`${name} must be true or false, got "${text}"`);
      else raw[name] = word;
    } else if (field.type === 'integer' || field.type === 'number') {
      const number = Number(text);
      if (text.trim() === '' || Number.isNaN(number)) problems.push(`${name} must be a number, got "${text}"`);
      else raw[name] = number;
    } else {
      const allowed = literalsOf(field);
      if (allowed && !allowed.includes(text)) problems.push(`${name} must be one of ${allowed.join(', ')}, got "${text}"`);
      else raw[name] = text;
    }
  }
  const value = Value.Default(schema, raw) as Record<string, unknown>;
  for (const error of Value.Errors(schema, value)) {
    const name = error.path.slice(1);
    if (!problems.some((problem) => problem.startsWith(`${name} `))) {
      problems.push(`${name} ${error.message.replace(/^Expected/, 'must be')}`);
    }
  }
  if (problems.length) throw new ConfigError([...alongside, ...problems]);
  return value as Static<T>;
}
