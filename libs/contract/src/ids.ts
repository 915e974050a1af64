/** Our ids (push, device, event, credit, player bonus) are UUIDs; this is their text form, any case. */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

const UUID = new RegExp(UUID_PATTERN);

export function isUuid(value: string): boolean {
  return UUID.test(value);
}
