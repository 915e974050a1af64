import { Type, type Static, type TObject, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, ValueErrorType, type ValueError } from '@sinclair/typebox/compiler';
import type { Checked } from './checked';
import { displayHeaderName } from './headers';
import { PushRequestSchema, type PushRequest } from './push';
import { checkStorable } from './storable';

// Objects of the contract whose fields are ours to read; `meta` is the CRM's own and is kept as sent.
const CONTRACT_OBJECTS = new Set(['activity', 'android', 'ios', 'web']);

/** `value` without its null members; `value` itself when it has none (the usual request), so nothing is copied. */
function withoutNulls(value: Record<string, unknown>): Record<string, unknown> {
  for (const key in value) {
    if (value[key] !== null) continue;
    const out: Record<string, unknown> = {};
    for (const [name, item] of Object.entries(value)) if (item !== null) out[name] = item;
    return out;
  }
  return value;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** `null` in an optional field means absent: dropped from the request and its contract objects, never inside `meta`. */
export function dropNulls(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  let out = withoutNulls(value);
  for (const key of CONTRACT_OBJECTS) {
    const inner = out[key];
    if (!isPlainObject(inner)) continue;
    const kept = withoutNulls(inner);
    if (kept === inner) continue;
    // The caller's object is never changed.
    if (out === value) out = { ...value };
    out[key] = kept;
  }
  return out;
}

/** "/activity/id" -> "activity.id", "/android/body_loc_arcs/2" -> "android.body_loc_arcs[2]". */
export function fieldName(pointer: string): string {
  const parts = pointer.split('/').slice(1).map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.reduce((name, part) => (/^\d+$/.test(part) ? `${name}[${part}]` : name ? `${name}.${part}` : part), '');
}

function explain(error: ValueError): string {
  const { schema } = error;
  // A pattern or a union may word its own error: { pattern: '^https://', errorMessage: 'must be an https URL' }.
  if ((error.type === ValueErrorType.StringPattern || error.type === ValueErrorType.Union) && typeof schema.errorMessage === 'string') return schema.errorMessage;
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return 'is required';
    case ValueErrorType.Integer:
      return 'must be an integer';
    case ValueErrorType.Number:
      return 'must be a number';
    case ValueErrorType.String:
      return 'must be a string';
    case ValueErrorType.Object:
      return 'must be an object';
    case ValueErrorType.Array:
      return 'must be an array';
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.NumberMinimum:
      return `must be at least ${schema.minimum}`;
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.NumberMaximum:
      return `must be at most ${schema.maximum}`;
    case ValueErrorType.StringMinLength:
      return schema.minLength === 1 ? 'must not be empty' : `must be at least ${schema.minLength} characters`;
    case ValueErrorType.StringMaxLength:
      return `must be at most ${schema.maxLength} characters`;
    case ValueErrorType.ArrayMaxItems:
      return `must have at most ${schema.maxItems} items`;
    case ValueErrorType.Union: {
      const literals = (schema.anyOf as TSchema[]).map((option) => option.const);
      if (literals.every((literal) => typeof literal === 'string')) return `must be one of ${literals.join(', ')}`;
      return 'has none of the accepted forms';
    }
    default:
      return error.message.replace(/^Expected/, 'must be');
  }
}

/** One line naming each wrong field once, in document order. */
export function describeErrors(errors: Iterable<{ path: string; message: string }>, limit = 5, nameOf = fieldName): string {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const error of errors) {
    if (seen.has(error.path)) continue;
    seen.add(error.path);
    lines.push(`${nameOf(error.path) || 'request'} ${error.message}`);
    if (lines.length === limit) break;
  }
  return lines.join('; ');
}

export function compileChecker<T extends TSchema>(schema: T, nameOf = fieldName): (value: unknown) => Checked<Static<T>> {
  const compiled = TypeCompiler.Compile(schema);
  return (value) => {
    if (compiled.Check(value)) return { ok: true, value };
    const errors = [...compiled.Errors(value)].map((error) => ({ path: error.path, message: explain(error) }));
    return { ok: false, error: describeErrors(errors, 5, nameOf) };
  };
}

/** Validates one push request after dropping null fields: its schema, then checkStorable. */
export const checkPushRequest = (() => {
  const check = compileChecker(PushRequestSchema);
  return (value: unknown): Checked<PushRequest> => {
    const checked = check(dropNulls(value));
    if (!checked.ok) return checked;
    const problem = checkStorable(checked.value);
    return problem ? { ok: false, error: problem } : checked;
  };
})();

/** Lower-case names as Node gives them: fastify leaves a custom compiler's schemas as written. */
function lowerCaseNames(schema: TObject): TObject {
  const properties = Object.entries(schema.properties).map(([name, property]) => [name.toLowerCase(), property]);
  return Type.Object(Object.fromEntries(properties));
}

const headerName = (pointer: string) => `${displayHeaderName(fieldName(pointer))} header`;

export function typeboxValidatorCompiler({ schema, httpPart }: { schema: TSchema; httpPart?: string }) {
  const check = httpPart === 'headers' ? compileChecker(lowerCaseNames(schema as TObject), headerName) : compileChecker(schema);
  return (value: unknown) => {
    const result = check(value);
    return result.ok ? { value: result.value } : { error: new ValidationError(result.error) };
  };
}

export class ValidationError extends Error {
  readonly statusCode = 400;
}
