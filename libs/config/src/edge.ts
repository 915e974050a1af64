import { Type, type Static } from '@sinclair/typebox';
import { durationMs } from './events';

// The gateway's public edge: what it believes of, and allows, whoever calls it from outside.

const DURATION = '^\\d+\\s*[smhd]?$';

export const EdgeEnv = Type.Object({
  AUTH_FAILURE_LIMIT: Type.Integer({
    default: 20,
    minimum: 0,
    description: 'Failed authentications from one address (or for one Basic user or OAuth client) within AUTH_FAILURE_WINDOW that lock it out for as long (0: no limit)',
  }),
  AUTH_FAILURE_WINDOW: Type.String({ default: '5m', pattern: DURATION, description: 'The window of AUTH_FAILURE_LIMIT, and how long a lockout lasts ("5m", "1h", "300")' }),
});
type EdgeRaw = Static<typeof EdgeEnv>;

export interface EdgeSettings {
  /** `limit` failed authentications within `windowMs` lock a key out for `windowMs`; limit 0: never. */
  authFailures: { limit: number; windowMs: number };
}

/** Checks EdgeEnv values that the schema cannot: durations above zero. */
export function edgeSettings(raw: EdgeRaw): { settings: EdgeSettings; problems: string[] } {
  const problems: string[] = [];
  const windowMs = durationMs(raw.AUTH_FAILURE_WINDOW);
  if (windowMs === 0) problems.push('AUTH_FAILURE_WINDOW must be longer than 0');
  return {
    settings: {
      authFailures: { limit: raw.AUTH_FAILURE_LIMIT, windowMs },
    },
    problems,
  };
}
