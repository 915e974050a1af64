import type { Sql } from '@operator/db';

/**
 * The events feed's last position now (0 with no event): a test reads the feed after it, past
 * every event the suites before it wrote into the project's database.
 */
export async function feedTop(sql: Sql): Promise<bigint> {
  const { rows } = await sql.query<{ top: string }>(`SELECT COALESCE(max(feed_seq), 0)::text AS top FROM events`);
  return BigInt(rows[0].top);
}
