// Day partitions made as libs/db/src/partitions.ts makes them, for .mjs scripts that cannot import
// it: rows of a day without a partition would go to the default one, and the apps could no longer
// make that day's partition.

const DAY_MS = 86_400_000;

/** The UTC day of a time in milliseconds, as YYYY-MM-DD. */
export const dayOf = (ms) => new Date(ms).toISOString().slice(0, 10);

const nextDay = (day) => dayOf(Date.parse(`${day}T00:00:00Z`) + DAY_MS);

// Messages and deliveries leave half of each page free, so that their updates stay HOT.
const TABLES = [
  { table: 'messages', bound: (day) => `'${day}'`, storage: 'WITH (fillfactor = 50)' },
  { table: 'deliveries', bound: (day) => `'${day}'`, storage: 'WITH (fillfactor = 50)' },
  { table: 'events', bound: (day) => `'${day} 00:00:00+00'`, storage: '' },
];

/** Each in a transaction of its own under the apps' lock; answers those made and those that could not be. */
export async function makeDayPartitions(client, from, to) {
  const made = [];
  const skipped = [];
  for (let day = from; day <= to; day = nextDay(day)) {
    for (const { table, bound, storage } of TABLES) {
      const name = `${table}_p${day.replaceAll('-', '')}`;
      try {
        await client.query('BEGIN');
        await client.query("SELECT pg_advisory_xact_lock(hashtext('operator-api partitions'))");
        const { rowCount } = await client.query('SELECT 1 FROM pg_class WHERE relname = $1 AND relnamespace = current_schema()::regnamespace', [name]);
        if (!rowCount) {
          await client.query(`CREATE TABLE "${name}" (LIKE "${table}" INCLUDING DEFAULTS) ${storage}`);
          await client.query(`ALTER TABLE "${table}" ATTACH PARTITION "${name}" FOR VALUES FROM (${bound(day)}) TO (${bound(nextDay(day))})`);
          made.push(name);
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        if (error.code !== '23514') throw error;
        skipped.push(name);
      }
    }
  }
  return { made, skipped };
}
