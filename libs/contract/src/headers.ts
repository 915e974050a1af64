import { Type, type TSchema } from '@sinclair/typebox';
import type { Checked } from './checked';
import { MAX_CRM_HEADER_BYTES } from './limits';
import { textProblem, utf8Bytes } from './storable';

// Contract 5.2: the CRM puts these headers on every request. Their middle word is the CRM maker's
// name ("Service" by default), so it is configurable.

export const CRM_HEADER_FIELDS = {
  id: 'Id',
  activity_id: 'Activityid',
  action_id: 'Actionid',
  action_group_id: 'Actiongroupid',
  action_communication_profile_id: 'Actioncommunicationprofileid',
  trigger_hash: 'Triggerhash',
} as const;

export type CrmHeaderField = keyof typeof CRM_HEADER_FIELDS;
export type CrmHeaders = Partial<Record<CrmHeaderField, string>>;

/** Lower-case header names (as Node gives them) for a given middle word. */
export function crmHeaderNames(word: string): Record<CrmHeaderField, string> {
  const names = {} as Record<CrmHeaderField, string>;
  for (const [field, suffix] of Object.entries(CRM_HEADER_FIELDS) as [CrmHeaderField, string][]) {
    names[field] = `x-${word}-${suffix}`.toLowerCase();
  }
  return names;
}

/** "x-service-triggerhash" -> "X-Service-Triggerhash", for error messages. */
export function displayHeaderName(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_match, dash: string, letter: string) => dash + letter.toUpperCase());
}

const MEANINGS: Record<CrmHeaderField, string> = {
  id: 'Unique id per trigger, per player: the idempotency key of a credit',
  activity_id: 'Id of the activity',
  action_id: 'Id of the action',
  action_group_id: 'Action group containing the action',
  action_communication_profile_id: 'Communication profile (translation) used',
  trigger_hash: 'Identifies a unique send from the same event',
};

/** What a schema cannot say (the size in bytes, storable text) readCrmHeaders checks. */
export function crmHeadersSchema(names: Record<CrmHeaderField, string>, required: CrmHeaderField[] = []) {
  const properties: Record<string, TSchema> = {};
  for (const field of Object.keys(names) as CrmHeaderField[]) {
    const header = Type.String({ description: `${MEANINGS[field]}; at most ${MAX_CRM_HEADER_BYTES} bytes (UTF-8)` });
    properties[displayHeaderName(names[field])] = required.includes(field) ? header : Type.Optional(header);
  }
  return Type.Object(properties);
}

/** The CRM headers of a request, or an error naming the first that cannot be stored as sent. */
export function readCrmHeaders(
  headers: Record<string, string | string[] | undefined>,
  names: Record<CrmHeaderField, string>,
): Checked<CrmHeaders> {
  const out: CrmHeaders = {};
  for (const field of Object.keys(names) as CrmHeaderField[]) {
    const raw = headers[names[field]];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (value === undefined || value === '') continue;
    if (utf8Bytes(value) > MAX_CRM_HEADER_BYTES) {
      return { ok: false, error: `${displayHeaderName(names[field])} header must be at most ${MAX_CRM_HEADER_BYTES} bytes (UTF-8)` };
    }
    const problem = textProblem(value);
    if (problem) return { ok: false, error: `${displayHeaderName(names[field])} header ${problem}` };
    out[field] = value;
  }
  return { ok: true, value: out };
}
