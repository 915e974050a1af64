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
/** The headers as stored with a message or a credit: absent headers are left out. */
export type CrmHeaders = Partial<Record<CrmHeaderField, string>>;

const MAX_HEADER_VALUE = 512;

/** Lower-case header names (as Node gives them) for a given middle word. */
export function crmHeaderNames(word: string): Record<CrmHeaderField, string> {
  const names = {} as Record<CrmHeaderField, string>;
  for (const [field, suffix] of Object.entries(CRM_HEADER_FIELDS) as [CrmHeaderField, string][]) {
    names[field] = `x-${word}-${suffix}`.toLowerCase();
  }
  return names;
}

export function readCrmHeaders(
  headers: Record<string, string | string[] | undefined>,
  names: Record<CrmHeaderField, string>,
): CrmHeaders {
  const out: CrmHeaders = {};
  for (const field of Object.keys(names) as CrmHeaderField[]) {
    const raw = headers[names[field]];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (value !== undefined && value !== '') out[field] = value.slice(0, MAX_HEADER_VALUE);
  }
  return out;
}
