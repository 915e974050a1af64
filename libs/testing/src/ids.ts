import { randomInt } from 'node:crypto';

/** A brand id no other test uses, so each test owns its rows. */
export const uniqueBrandId = () => randomInt(1_000_000, 2 ** 47);
export const uniqueId = () => randomInt(1, 2 ** 47);
export const uniqueName = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${randomInt(1e9).toString(36)}`;
