import type { LogSink } from '@operator/config';
import type pg from 'pg';
import type { Db, Sql } from './client';
import { createPoller, type Poller } from './poller';

// Day partitions of messages, deliveries and events: each UTC day has one of each table, made ahead
// by every app at start and hourly. A row of a day with none goes to the DEFAULT partition, so no
// insert fails for want of one. Retention drops a day's partitions whole (retention.ts).

export type PartitionedTable = 'messages' | 'deliveries' | 'events';

interface TableSpec {
  table: PartitionedTable;
  /** Bounds of day `day` (YYYY-MM-DD) in the type of the table's partition key. */
  bound(day: string): string;
  /** Storage parameters of each partition. */
  storage: string;
}

// Messages and deliveries are written again within seconds of their insert (the record, the
// settlement): half of each page is left free so those versions stay HOT.
const TABLES: TableSpec[] = [
  { table: 'messages', bound: (day) => `'${day}'`, storage: 'WITH (fillfactor = 50)' },
  { table: 'deliveries', bound: (day) => `'${day}'`, storage: 'WITH (fillfactor = 50)' },
  { table: 'events', bound: (day) => `'${day} 00:00:00+00'`, storage: '' },
];

/** A day, in milliseconds. */
export const DAY_MS = 86_400_000;

/** The last day dayOf wrote out: a batch's messages, and the ids a statement names, share a few days. */
let lastDay = Number.NaN;
let lastDayText = '';

/** The UTC day of a time, as YYYY-MM-DD. */
export function dayOf(time: Date | number): string {
  const day = Math.floor((typeof time === 'number' ? time : time.getTime()) / DAY_MS);
  if (day !== lastDay) {
    lastDayText = new Date(day * DAY_MS).toISOString().slice(0, 10);
    lastDay = day;
  }
  return lastDayText;
}

/** The day `days` after `day` (before, when negative). */
export const addDays = (day: string, days: number): string => dayOf(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS);

/** The name of a day's partition: messages_p20261126. */
export const partitionName = (table: PartitionedTable, day: string) => `${table}_p${day.replaceAll('-', '')}`;

const DAY_OF_NAME = /_p(\d{4})(\d{2})(\d{2})$/;

/** The day of a partition's name, or undefined for the default partition. */
export function dayOfPartition(name: string): string | undefined {
  const match = DAY_OF_NAME.exec(name);
  return match ? `${match[1]}-${match[2]}-${match[3]}` : undefined;
}

/** The day of rows whose id is not a UUIDv7: no partition is made for it, so they stay in the default one. */
export const UNDATED_DAY = '1970-01-01';

/**
 * The UTC day in a UUIDv7's timestamp (its first 48 bits, in milliseconds), UNDATED_DAY for an id
 * of another version. A push id names its partition. The same as uuid_v7_day() in SQL.
 */
export function uuidV7Day(id: string): string {
  if (id.length !== 36 || id[14] !== '7') return UNDATED_DAY;
  return dayOf(Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16));
}

/** The distinct days of these ids, for a statement to read only their partitions. */
export const daysOfIds = (ids: Iterable<string>): string[] => [...new Set(Array.from(ids, uuidV7Day))];

/** The day partitions that exist, by table, with their days. */
export async function listPartitions(sql: Sql): Promise<{ table: PartitionedTable; name: string; day: string | undefined }[]> {
  const { rows } = await sql.query<{ parent: PartitionedTable; name: string }>(
    `SELECT p.relname AS parent, c.relname AS name
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
      WHERE p.relname IN ('messages', 'deliveries', 'events') AND p.relnamespace = current_schema()::regnamespace
      ORDER BY c.relname`,
  );
  return rows.map((row) => ({ table: row.parent, name: row.name, day: dayOfPartition(row.name) }));
}

export interface EnsureResult {
  /** Partitions made now. */
  created: string[];
  /** Days whose partition could not be made, with why (rows of that day already in the default partition, a lock not granted in time). */
  skipped: { name: string; reason: string }[];
}

/**
 * Makes the partitions of the days from `from` through `to` (YYYY-MM-DD) that are missing. Each is
 * created as a table of its own, then attached: attaching takes a lock that lets reads and writes
 * of the parent go on (CREATE TABLE ... PARTITION OF would block them). One app at a time (an
 * advisory lock), each partition in a transaction of its own that waits at most `lockTimeoutMs`
 * for its locks: a partition not made now is made at the next look.
 */
export async function ensurePartitions(pool: pg.Pool, from: string, to: string, lockTimeoutMs = 2000): Promise<EnsureResult> {
  const result: EnsureResult = { created: [], skipped: [] };
  const existing = new Set((await listPartitions(pool)).map((p) => p.name));
  const wanted: { spec: TableSpec; day: string; name: string }[] = [];
  for (let day = from; day <= to; day = addDays(day, 1)) {
    for (const spec of TABLES) {
      const name = partitionName(spec.table, day);
      if (!existing.has(name)) wanted.push({ spec, day, name });
    }
  }
  for (const { spec, day, name } of wanted) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`);
      await client.query("SELECT pg_advisory_xact_lock(hashtext('operator-api partitions'))");
      const { rowCount } = await client.query('SELECT 1 FROM pg_class WHERE relname = $1 AND relnamespace = current_schema()::regnamespace', [name]);
      if (!rowCount) {
        await client.query(`CREATE TABLE "${name}" (LIKE "${spec.table}" INCLUDING DEFAULTS) ${spec.storage}`);
        await client.query(
          `ALTER TABLE "${spec.table}" ATTACH PARTITION "${name}" FOR VALUES FROM (${spec.bound(day)}) TO (${spec.bound(addDays(day, 1))})`,
        );
        result.created.push(name);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      const code = (error as { code?: string }).code;
      // 23514: the default partition holds rows of that day, 55P03: a lock not granted in time.
      if (code !== '23514' && code !== '55P03') throw error;
      result.skipped.push({ name, reason: code === '23514' ? 'rows of that day are in the default partition' : 'lock not granted in time' });
    } finally {
      client.release();
    }
  }
  return result;
}

/** Days whose partitions are made ahead of today: a week in which the apps may all be down. */
export const PARTITION_DAYS_AHEAD = 7;

export interface PartitionKeeperOptions {
  db: Db;
  log: LogSink;
  /** Days made ahead of today. */
  aheadDays?: number;
  /** Pause between looks. */
  intervalMs?: number;
  /** Today, for tests. */
  now?: () => number;
}

export interface PartitionKeeper extends Poller {
  /** Settles after the first look, made or not (PostgreSQL down: it is tried again). */
  firstLook: Promise<void>;
}

/**
 * Makes the partitions from yesterday through `aheadDays` days ahead, now and then every
 * `intervalMs` (an hour): started by the apps that write messages and events (the gateway, which
 * waits for the first look before it listens, so that a new day's first rows find their partition,
 * the bonus app and the webhook dispatcher).
 */
export function startPartitionKeeper({
  db,
  log,
  aheadDays = PARTITION_DAYS_AHEAD,
  intervalMs = 3_600_000,
  now = Date.now,
}: PartitionKeeperOptions): PartitionKeeper {
  const said = new Set<string>();
  let looked: () => void = () => undefined;
  const firstLook = new Promise<void>((resolve) => {
    looked = resolve;
  });
  const poller = createPoller({
    what: 'partitions',
    log,
    idleMs: intervalMs,
    round: async () => {
      const today = dayOf(now());
      const { created, skipped } = await ensurePartitions(db.pool, addDays(today, -1), addDays(today, aheadDays)).finally(looked);
      if (created.length) log.info({ created }, 'day partitions created');
      for (const { name, reason } of skipped) {
        if (said.has(name)) continue;
        said.add(name);
        log.warn({ partition: name, reason }, 'a day partition could not be created: its rows go to the default partition');
      }
      return false;
    },
  });
  poller.start();
  return { ...poller, firstLook };
}
