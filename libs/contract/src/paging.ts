import { Type } from '@sinclair/typebox';

/** How many rows a list answers: 100 when absent, never more than 1000. */
export const PageLimit = Type.Optional(
  Type.String({ pattern: '^[0-9]{1,4}$', errorMessage: 'must be a number', description: 'At most this many rows (100 when absent, 1000 at most)' }),
);

export const LimitQuerySchema = Type.Object({ limit: PageLimit });
