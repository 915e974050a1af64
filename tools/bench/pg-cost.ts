// What a stage of `npm run bench` costs PostgreSQL, per message: the WAL it wrote (from
// pg_current_wal_lsn(), a CHECKPOINT first so that every stage pays its full-page images alike,
// and with pg_walinspect how much of it was full-page images), the rows it inserted, updated
// (HOT or not) and deleted (pg_stat_user_tables, partitions counted under their table), and the
// transactions it committed (pg_stat_database). Also what retention costs per message it drops,
// and the dispatcher alone, one event per POST and batched (tools/bench-dispatcher.mjs).
//
// WAL is the cluster's: what other databases of the same server write during a stage counts too
// (with pg_walinspect the share of records naming another database's relations is logged). Row and
// commit counts are the bench database's. PostgreSQL's backends flush those counters lazily (an idle
// backend within 10 s), so each reading waits until they stop moving.
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import pg from 'pg';
import { addDays, dayOf, dayOfPartition, dropExpiredPartitions, ensurePartitions, listPartitions, PARTITION_DAYS_AHEAD, UNDATED_DAY } from '@operator/db';

export interface Figure {
  text: string;
  rate: number;
}

interface Tally {
  ins: number;
  upd: number;
  hot: number;
  del: number;
}

/** The dispatcher rows' size: events, and CRM_STATUS_WEBHOOK_BATCH_MAX for the batched one. */
const DISPATCHER_EVENTS = Number(process.env.BENCH_DISPATCHER_EVENTS || 50_000);
const DISPATCHER_BATCH = Number(process.env.BENCH_DISPATCHER_BATCH || 100);

const log = (line: string) => console.log(`bench: ${line}`);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const fmt = (n: number, digits = 2) => n.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const writes = (t: Tally) => t.ins + t.upd + t.del;
/** The bench database's sessions stop statements after 10 s; a CHECKPOINT or reading the WAL may take longer. */
const NO_TIMEOUT = '-c statement_timeout=0';
/** Longer than PGSTAT_IDLE_INTERVAL (10 s): an idle backend has flushed its counters by then. */
const QUIET_MS = 11_000;

/**
 * Rows written per table of the project: a partition under its partitioned table, or, `byPartition`,
 * under its own name (so that a partition dropped in between counts for nothing on either side).
 */
async function tables(client: pg.ClientBase, byPartition = false): Promise<Map<string, Tally>> {
  const { rows } = await client.query<{ name: string } & Tally>(
    `SELECT ${byPartition ? 's.relname' : 'coalesce(p.relname, s.relname)'} AS name, sum(s.n_tup_ins)::float8 AS ins, sum(s.n_tup_upd)::float8 AS upd,
            sum(s.n_tup_hot_upd)::float8 AS hot, sum(s.n_tup_del)::float8 AS del
       FROM pg_stat_user_tables s
       LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
       LEFT JOIN pg_class p ON p.oid = i.inhparent
      WHERE s.relname <> '_prisma_migrations'
      GROUP BY 1`,
  );
  return new Map(rows.map(({ name, ...tally }) => [name, tally]));
}

async function commits(client: pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ n: number }>('SELECT xact_commit::float8 AS n FROM pg_stat_database WHERE datname = current_database()');
  return rows[0].n;
}

/** Waits until no backend has row counts left to flush: the counters unchanged for QUIET_MS. */
async function settle(client: pg.ClientBase, { maxMs = 90_000, byPartition = false } = {}): Promise<Map<string, Tally>> {
  const started = Date.now();
  let last = '';
  let since = Date.now();
  for (;;) {
    const now = await tables(client, byPartition);
    const key = [...now].map(([name, t]) => `${name}:${writes(t)}`).join(',');
    if (key !== last) {
      last = key;
      since = Date.now();
    } else if (Date.now() - since >= QUIET_MS) return now;
    if (Date.now() - started > maxMs) {
      log(`row counters still moving after ${maxMs / 1000} s: the figures may be off`);
      return now;
    }
    await sleep(500);
  }
}

function delta(before: Map<string, Tally>, after: Map<string, Tally>): Map<string, Tally> {
  const out = new Map<string, Tally>();
  for (const [name, a] of after) {
    const b = before.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0 };
    const d = { ins: a.ins - b.ins, upd: a.upd - b.upd, hot: a.hot - b.hot, del: a.del - b.del };
    if (writes(d)) out.set(name, d);
  }
  return out;
}

function sum(tallies: Map<string, Tally>): Tally {
  const total = { ins: 0, upd: 0, hot: 0, del: 0 };
  for (const t of tallies.values()) {
    total.ins += t.ins;
    total.upd += t.upd;
    total.hot += t.hot;
    total.del += t.del;
  }
  return total;
}

const perTable = (tallies: Map<string, Tally>, messages: number) =>
  [...tallies]
    .sort(([, a], [, b]) => writes(b) - writes(a))
    .map(([name, t]) => `${name} ${[t.ins && `${fmt(t.ins / messages)} ins`, t.upd && `${fmt(t.upd / messages)} upd (${fmt(t.hot / messages)} HOT)`, t.del && `${fmt(t.del / messages)} del`].filter(Boolean).join(', ')}`)
    .join('; ');

const lsn = async (client: pg.ClientBase) => (await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;

let slots = 0;

/** A window of WAL: a CHECKPOINT, then from the LSN after it to the LSN at `stop()`. */
class WalWindow {
  private constructor(
    private readonly client: pg.ClientBase,
    private readonly from: string,
    private readonly redo: string,
    private readonly inspect: boolean,
    private readonly slot: string | undefined,
  ) {}

  /**
   * With pg_walinspect, a temporary replication slot keeps the window's WAL on disk until it is read
   * (it goes with the session, whatever happens to the bench).
   */
  static async open(client: pg.ClientBase): Promise<WalWindow> {
    const inspect = await client.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect').then(
      () => true,
      (error: Error) => (log(`no pg_walinspect (${error.message}): WAL without its full-page images not measured`), false),
    );
    let slot: string | undefined;
    if (inspect) {
      slot = `bench_wal_${process.pid}_${++slots}`;
      await client.query('SELECT pg_create_physical_replication_slot($1, true, true)', [slot]).catch((error: Error) => {
        log(`no replication slot (${error.message}): the window's WAL may be recycled before it is read`);
        slot = undefined;
      });
    }
    await client.query('CHECKPOINT').catch((error: Error) => log(`no CHECKPOINT (${error.message}): full-page images are not comparable`));
    const { rows } = await client.query<{ lsn: string; redo: string }>('SELECT pg_current_wal_lsn()::text AS lsn, redo_lsn::text AS redo FROM pg_control_checkpoint()');
    return new WalWindow(client, rows[0].lsn, rows[0].redo, inspect, slot);
  }

  /** Ends the window now; answers its bytes and, with pg_walinspect, the part that was full-page images. */
  async stop() {
    const { rows } = await this.client.query<{ lsn: string; redo: string }>('SELECT pg_current_wal_lsn()::text AS lsn, redo_lsn::text AS redo FROM pg_control_checkpoint()');
    const to = rows[0].lsn;
    if (rows[0].redo !== this.redo) log('a checkpoint started inside the window: it paid for more full-page images than the CHECKPOINT alone would');
    const bytes = Number((await this.client.query<{ n: string }>('SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::text AS n', [this.from, to])).rows[0].n);
    return { bytes, read: () => this.read(to) };
  }

  /** Full-page images, and how much of the window names relations of other databases (noise). */
  private async read(to: string) {
    if (!this.inspect) return undefined;
    const started = performance.now();
    try {
      const { rows } = await this.client.query<{ fpi: number; fpis: number; mine: number; other: number; vacuum: number }>(
        `SELECT coalesce(sum(fpi_length), 0)::float8 AS fpi, count(*) FILTER (WHERE fpi_length > 0)::float8 AS fpis,
                coalesce(sum(record_length) FILTER (WHERE resource_manager = 'Heap2' AND record_type IN ('VACUUM', 'FREEZE_PAGE', 'VISIBLE')), 0)::float8 AS vacuum,
                coalesce(sum(record_length) FILTER (WHERE db = (SELECT oid::text FROM pg_database WHERE datname = current_database())), 0)::float8 AS mine,
                coalesce(sum(record_length) FILTER (WHERE db NOT IN ('0', (SELECT oid::text FROM pg_database WHERE datname = current_database()))), 0)::float8 AS other
           FROM (SELECT resource_manager, record_type, record_length, fpi_length, substring(block_ref from 'rel [0-9]+/([0-9]+)/') AS db
                   FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)) r`,
        [this.from, to],
      );
      // By resource manager: Heap (rows), Btree (index entries), Transaction (commits), XLOG (images), ...
      const kinds = await this.client.query<{ kind: string; bytes: number }>(
        `SELECT "resource_manager/record_type" AS kind, combined_size::float8 AS bytes FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn) WHERE count > 0 ORDER BY combined_size DESC`,
        [this.from, to],
      );
      return { ...rows[0], kinds: kinds.rows, seconds: (performance.now() - started) / 1000 };
    } catch (error) {
      log(`pg_walinspect could not read the window (${(error as Error).message})`);
      return undefined;
    } finally {
      if (this.slot) await this.client.query('SELECT pg_drop_replication_slot($1)', [this.slot]).catch(() => undefined);
    }
  }
}

export interface Cost {
  messages: number;
  wal: number;
  fpi?: number;
  fpis?: number;
  writes: Tally;
  commits: number;
  /** Of `commits`, about how many the apps' pollers made (their rate before the stage, over the stage). */
  idleCommits: number;
}

/**
 * Starts measuring a stage: waits for the counters to settle, reads them, then CHECKPOINT. Call
 * `end(messages)` as soon as the stage is over (the WAL window closes there; the counters are read
 * once they settle) for the stage's cost per message, as rows of the bench's table.
 */
/**
 * Where PostgreSQL's time went during a stage, statement by statement, when the server loads
 * pg_stat_statements (`shared_preload_libraries`; the bench does not need it): the statements are
 * counted from the stage's start, on this database alone (other benches may share the server), and
 * the costliest printed per message.
 */
class StatementTimes {
  private constructor(
    private readonly client: pg.Client,
    private readonly before: Map<string, { ms: number; calls: number }>,
  ) {}

  static async open(client: pg.Client): Promise<StatementTimes | { report(): Promise<void> }> {
    const loaded = await client.query(`SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'`).catch(() => ({ rowCount: 0 }));
    if (!loaded.rowCount) {
      const created = await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements').then(
        () => true,
        () => false,
      );
      if (!created) return { report: async () => undefined };
    }
    const read = await StatementTimes.read(client);
    return read ? new StatementTimes(client, read) : { report: async () => undefined };
  }

  private static async read(client: pg.Client): Promise<Map<string, { ms: number; calls: number; query: string }> | undefined> {
    try {
      const { rows } = await client.query<{ id: string; ms: number; calls: string; query: string }>(
        `SELECT queryid::text || ':' || dbid AS id, total_exec_time + total_plan_time AS ms, calls, query FROM pg_stat_statements
          WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      return new Map(rows.map((row) => [row.id, { ms: row.ms, calls: Number(row.calls), query: row.query }]));
    } catch {
      // Created, but not in shared_preload_libraries: nothing is counted.
      return undefined;
    }
  }

  async report(label: string, messages: number): Promise<void> {
    const after = await StatementTimes.read(this.client);
    if (!after) return;
    const spent = [...after]
      .map(([id, now]) => ({ ms: now.ms - (this.before.get(id)?.ms ?? 0), calls: now.calls - (this.before.get(id)?.calls ?? 0), query: now.query }))
      .filter((each) => each.calls > 0)
      .sort((a, b) => b.ms - a.ms);
    const total = spent.reduce((sum, each) => sum + each.ms, 0);
    log(`${label}: statements' time in PostgreSQL (pg_stat_statements), ${fmt((1000 * total) / messages, 0)} µs a message in all; the costliest:`);
    for (const each of spent.slice(0, 12)) {
      const text = each.query.replace(/\s+/g, ' ').slice(0, 100);
      log(`  ${fmt((1000 * each.ms) / messages, 1)} µs a message, ${each.calls} calls, ${fmt(each.ms / each.calls, 2)} ms a call: ${text}`);
    }
  }
}

export async function beginCost(databaseUrl: string, label: string) {
  const client = new pg.Client({ connectionString: databaseUrl, options: NO_TIMEOUT });
  await client.connect();
  try {
    const before = await settle(client);
    // The apps' pollers commit while nothing is sent: their rate over 5 s, once the counters settled.
    const idleFrom = await commits(client);
    await sleep(5000);
    const idlePerSecond = ((await commits(client)) - idleFrom) / 5;
    const statements = await StatementTimes.open(client);
    const window = await WalWindow.open(client);
    const commitsBefore = await commits(client);
    const started = performance.now();
    return {
      async end(messages: number): Promise<{ cost: Cost; figures: Record<string, Figure> }> {
        try {
          const stageEnded = performance.now();
          const wal = await window.stop();
          await statements.report(label, messages);
          const changed = delta(before, await settle(client));
          // Counted until the counters settled: less what the pollers left running committed since the stage ended.
          const settledAt = performance.now();
          const settled = await commits(client);
          await sleep(5000);
          const idleAfter = ((await commits(client)) - settled) / 5;
          const commitCount = Math.max(0, settled - commitsBefore - (idleAfter * (settledAt - stageEnded)) / 1000);
          const idle = Math.min(commitCount, (idlePerSecond * (stageEnded - started)) / 1000);
          const inspected = await wal.read();
          const cost: Cost = { messages, wal: wal.bytes, fpi: inspected?.fpi, fpis: inspected?.fpis, writes: sum(changed), commits: commitCount, idleCommits: idle };
          log(`${label}, rows written per message by table: ${perTable(changed, messages)}`);
          if (inspected) {
            const share = inspected.other / Math.max(1, wal.bytes);
            log(
              `${label}: WAL ${fmt(wal.bytes / 1e6, 1)} MB, of which records on this database's relations ${fmt(inspected.mine / 1e6, 1)} MB` +
                `, on other databases' ${fmt(inspected.other / 1e6, 1)} MB (${fmt(100 * share, 1)}%)${share > 0.05 ? ': other work on the server inflates the WAL figure' : ''}` +
                `; vacuum's records (autovacuum included) ${fmt(inspected.vacuum / 1e6, 1)} MB (read in ${inspected.seconds.toFixed(0)} s)`,
            );
            log(`${label}, WAL per message by kind of record: ${inspected.kinds.map(({ kind, bytes }) => `${kind} ${fmt(bytes / messages, 0)}`).join(', ')}`);
          }
          return { cost, figures: costFigures(cost) };
        } finally {
          await client.end();
        }
      },
    };
  } catch (error) {
    await client.end();
    throw error;
  }
}

function costFigures(c: Cost): Record<string, Figure> {
  const n = c.messages;
  const w = c.writes;
  const fpi =
    c.fpi === undefined
      ? ''
      : ` (full-page images ${fmt(c.fpi / n, 0)} bytes, ${fmt((c.fpis ?? 0) / n)} records with one; ${fmt((c.wal - c.fpi) / n, 0)} bytes without)`;
  return {
    pgWal: { text: `${fmt(c.wal / n, 0)} bytes of WAL${fpi}`, rate: c.wal / n },
    pgWrites: {
      text: `${fmt(writes(w) / n)} row writes: ${fmt(w.ins / n)} inserts, ${fmt(w.upd / n)} updates (${fmt(w.hot / n)} HOT), ${fmt(w.del / n)} deletes`,
      rate: writes(w) / n,
    },
    pgCommits: { text: `${fmt(c.commits / n, 3)} commits (about ${fmt(c.idleCommits / n, 3)} of them the apps' polling)`, rate: c.commits / n },
  };
}

/**
 * Retention's cost. Retention drops a day's partitions whole once the day is past the retention,
 * and the bench's rows are all in today's: dropExpiredPartitions, retention's own, runs as if two
 * days had gone by (a retention of one day), after a CHECKPOINT, and answers the row writes and WAL
 * per message dropped; with `endToEnd` (the end-to-end stage's row writes and WAL bytes per
 * message) the total from acceptance to gone. A dropped partition needs no VACUUM, but its rows'
 * updates left dead versions that autovacuum clears while the day lives: that VACUUM is run on the
 * day's partitions first and counted in the total. Then the partitions from yesterday on are made
 * again (as the apps' partition keeper would), for the stages that follow.
 */
export async function retentionCost(databaseUrl: string, endToEnd?: { writes: number; wal: number }): Promise<Record<string, Figure>> {
  // One session holds the WAL window; the drops and the partitions made after take others.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 3, options: NO_TIMEOUT });
  const client = await pool.connect();
  try {
    const retentionDays = 1;
    const today = dayOf(Date.now());
    const now = Date.parse(`${addDays(today, retentionDays + 1)}T12:00:00Z`);
    // Every day through today: what dropExpiredPartitions takes to be past the retention at `now`.
    const doomed = (await listPartitions(client)).filter((p) => p.day !== undefined && p.day <= today);
    const dated = `SELECT count(*)::float8 AS n FROM messages WHERE accepted_on > DATE '${UNDATED_DAY}' AND accepted_on <= DATE '${today}'`;
    const messagesIn = async () => (await client.query<{ n: number }>(dated)).rows[0].n;
    const undated = (await client.query<{ n: number }>('SELECT count(*)::float8 AS n FROM messages_default')).rows[0].n;
    if (undated) log(`retention: ${undated} messages in the default partition, which this figure leaves out`);

    const vacuumFrom = await lsn(client);
    for (const { name } of doomed) await client.query(`VACUUM "${name}"`);
    const vacuumWal = Number((await client.query<{ n: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS n', [vacuumFrom])).rows[0].n);

    // By partition: a drop writes no row of the partition it drops, whose counters go with it (and
    // start again from nothing in the partition of the same name made again below).
    const before = await settle(client, { byPartition: true });
    const present = await messagesIn();
    const window = await WalWindow.open(client);
    const started = performance.now();
    const { dropped, busy } = await dropExpiredPartitions(pool, { retentionDays, now });
    const seconds = (performance.now() - started) / 1000;
    const wal = await window.stop();
    const messages = present - (await messagesIn());
    for (const { day, reason } of busy) log(`retention: day ${day} not dropped: ${reason}`);

    const made = await ensurePartitions(pool, addDays(today, -1), addDays(today, PARTITION_DAYS_AHEAD));
    if (made.skipped.length) log(`retention: partitions not made again: ${made.skipped.map((p) => `${p.name} (${p.reason})`).join(', ')}`);

    // This session's counters go out as it goes idle after this statement.
    await client.query('SELECT pg_stat_force_next_flush()').catch(() => undefined);
    const after = await settle(client, { byPartition: true });
    for (const name of dropped) {
      before.delete(name);
      after.delete(name);
    }
    const changed = delta(before, after);
    const inspected = await wal.read();
    if (!messages) return { retention: { text: `nothing dropped${busy.length ? ` (${busy.map((b) => `${b.day}: ${b.reason}`).join('; ')})` : ''}`, rate: 0 } };
    const rowWrites = writes(sum(changed));
    if (changed.size) log(`retention, rows written per message dropped by table: ${perTable(changed, messages)}`);
    const fpi = inspected ? ` (full-page images ${fmt(inspected.fpi / messages, 0)})` : '';
    const figures: Record<string, Figure> = {
      retention: {
        text:
          `${fmt(rowWrites / messages)} row writes, ${fmt(wal.bytes / messages, 0)} bytes of WAL${fpi} per message dropped` +
          ` (${messages.toLocaleString('en')} messages, ${dropped.length} partitions of ${new Set(dropped.map(dayOfPartition)).size} days in ${seconds.toFixed(2)} s)` +
          `; the VACUUM of the day's partitions before it, for their updates' dead rows, ${fmt(vacuumWal / messages, 0)} bytes`,
        rate: rowWrites / messages,
      },
    };
    if (endToEnd) {
      const rows = endToEnd.writes + rowWrites / messages;
      const bytes = endToEnd.wal + (wal.bytes + vacuumWal) / messages;
      figures.pgTotal = { text: `${fmt(rows)} row writes, ${fmt(bytes, 0)} bytes of WAL (the VACUUM before the drop included)`, rate: rows };
    }
    return figures;
  } finally {
    client.release();
    await pool.end();
  }
}

/**
 * The dispatcher alone, one event per POST and in arrays of `batch` (CRM_STATUS_WEBHOOK_BATCH_MAX),
 * each on a fresh database of its own (`<bench database>_dispatcher`): tools/bench-dispatcher.mjs.
 */
export async function dispatcherFigures(databaseUrl: string): Promise<Record<string, Figure>> {
  const events = DISPATCHER_EVENTS;
  const batch = DISPATCHER_BATCH;
  const tool = await import(pathToFileURL(resolve('tools/bench-dispatcher.mjs')).href);
  const { ensureDatabase, migrate } = await import(pathToFileURL(resolve('tools/db-migrate.mjs')).href);
  const url = new URL(databaseUrl);
  url.pathname = `${url.pathname}_dispatcher`;
  const figures: Record<string, Figure> = {};
  for (const [key, size] of [
    ['dispatchOne', 1],
    ['dispatchBatched', batch],
  ] as const) {
    await ensureDatabase(url.href, { recreate: true });
    migrate(url.href);
    const result: { events: number; seconds: number; postingSeconds: number } = await tool.benchDispatcher({ databaseUrl: url.href, events, batch: size });
    const rate = result.events / result.seconds;
    figures[key] = {
      text:
        `${rate.toFixed(0)} events/s (${result.events.toLocaleString('en')} in ${result.seconds.toFixed(1)} s from its start; ` +
        `${(result.events / result.postingSeconds).toFixed(0)} events/s from its first post, ${(result.seconds - result.postingSeconds).toFixed(1)} s after the start)`,
      rate,
    };
  }
  return figures;
}

/** The table's rows for these figures, after the end-to-end row: [stage, load, figure key]. */
export const costRows = (endToEnd: number): [string, string, string][] => [
  ['PostgreSQL per message: WAL', `end to end, ${endToEnd} messages, CHECKPOINT first; WAL of the whole server`, 'pgWal'],
  ['PostgreSQL per message: rows', 'end to end: inserts, updates, deletes of every table', 'pgWrites'],
  ['PostgreSQL per message: commits', 'end to end: transactions committed in the bench database', 'pgCommits'],
  ['retention', "today's partitions dropped by retention's statements as if past the retention, CHECKPOINT first", 'retention'],
  ['PostgreSQL per message, all in', 'end to end plus retention', 'pgTotal'],
  ['dispatcher: one event per POST', `${DISPATCHER_EVENTS} queued status events, local receiver, fresh database`, 'dispatchOne'],
  ['dispatcher: batched', `the same, CRM_STATUS_WEBHOOK_BATCH_MAX=${DISPATCHER_BATCH}`, 'dispatchBatched'],
];
