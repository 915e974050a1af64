// `node tools/bench/send-writes.mjs`: what the send path writes to PostgreSQL per one-device
// message, from acceptance until the push is settled (the dispatcher is not running: the status
// events are inserted, not posted). The gateway and the FCM worker (its sandbox) run as built,
// against a fresh database; MESSAGES messages go in batches of BATCH_SIZE, 4 in flight. Rows from
// pg_stat_user_tables (read once the apps have exited, which flushes their counters), WAL from
// pg_current_wal_lsn() after a CHECKPOINT, and this database's share read back with pg_walinspect
// (WRITES_DETAIL=1 splits it by kind of record).
import type { ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import pg from 'pg';
import { fcmToken, freePort } from '@operator/testing';
import { each, type Request } from './load';
import { appStarter, stopApp, waitUntil } from './processes';

const env = process.env;
const MESSAGES = Number(env.WRITES_MESSAGES || 20000);
const BATCH_SIZE = Number(env.WRITES_BATCH_SIZE || 500);
const PLAYERS = Number(env.WRITES_PLAYERS || 5000);
const DATABASE_URL = env.WRITES_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_writes';
const BRAND = 7;
const OPERATOR = { 'x-api-key': 'dev-operator-key' };
const INTERNAL = { 'x-api-key': 'dev-internal-key' };
const TABLES = ['messages', 'deliveries', 'events'];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
/** Holds the WAL slot, and reads the WAL without a statement timeout. */
const admin = new pg.Client({ connectionString: DATABASE_URL });
const appEnv: NodeJS.ProcessEnv = { ...env, NODE_ENV: 'development', DATABASE_URL, QUEUE_PREFIX: `writes-${Date.now()}`, LOG_LEVEL: 'warn', METRICS_PORT: '0' };

const start = appStarter(appEnv);
const stop = stopApp;
const until = (probe: () => Promise<boolean>, what: string, ms?: number) => waitUntil(probe, what, ms, 200);

interface Counters {
  ins: number;
  upd: number;
  hot: number;
  del: number;
}
type Snapshot = Record<string, Counters> & { wal: bigint; lsn: string; commits: number };

/**
 * Counters of every table (a partition's under its partitioned table), once they stop moving (a
 * backend flushes its counts when idle or on exit).
 */
async function snapshot(): Promise<Snapshot> {
  let last = '';
  for (;;) {
    await pool.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await pool.query<{ relname: string; ins: string; upd: string; hot: string; del: string }>(
      `SELECT coalesce(p.relname, s.relname) AS relname, sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd, sum(n_tup_hot_upd) AS hot, sum(n_tup_del) AS del
         FROM pg_stat_user_tables s LEFT JOIN pg_inherits i ON i.inhrelid = s.relid LEFT JOIN pg_class p ON p.oid = i.inhparent GROUP BY 1`,
    );
    const now = JSON.stringify(rows.sort((a, b) => a.relname.localeCompare(b.relname)));
    if (now === last) {
      const { rows: wal } = await pool.query<{ bytes: string; lsn: string; commits: string }>(
        `SELECT (pg_current_wal_lsn() - '0/0')::text AS bytes, pg_current_wal_lsn()::text AS lsn,
                (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits`,
      );
      const result = { wal: BigInt(wal[0].bytes), lsn: wal[0].lsn, commits: Number(wal[0].commits) } as Snapshot;
      for (const row of rows) result[row.relname] = { ins: Number(row.ins), upd: Number(row.upd), hot: Number(row.hot), del: Number(row.del) };
      return result;
    }
    last = now;
    await sleep(1500);
  }
}

let nextId = randomInt(1, 2 ** 40);
const message = (i: number) => ({
  activity: { id: nextId++, brand_id: BRAND, user_id: `fcm-player-${i % PLAYERS}`, activity_id: 55, action_group_id: 2, trigger_hash: 'writes', action_id: 3 },
  title: 'Weekend reload',
  body: 'Your 50 free spins are waiting',
  android: { priority: 'high', channel_id: 'promos' },
  meta: { campaign: 'writes', n: i },
});

async function main() {
  const gatewayPort = await freePort();
  let gateway = start('gateway', { PORT: String(gatewayPort), HOST: '127.0.0.1', MAX_EVENT_LOOP_DELAY_MS: '0' });
  let worker: ChildProcess | undefined;
  try {
    await until(async () => (await fetch(`http://127.0.0.1:${gatewayPort}/health/ready`).catch(() => undefined))?.ok === true, 'the gateway', 30000);
    const devices: Request[] = Array.from({ length: PLAYERS }, (_, i) => ({
      path: '/v1/devices',
      headers: INTERNAL,
      body: JSON.stringify({ user_id: `fcm-player-${i}`, brand_id: BRAND, provider: 'fcm', platform: 'android', token: fcmToken() }),
    }));
    await each(gatewayPort, 16, devices);
    await pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const databaseOid = Number((await pool.query(`SELECT oid FROM pg_database WHERE datname = current_database()`)).rows[0].oid);
    // The gateway starts again, so that its sessions' counters of the devices are flushed (on exit) before the first look.
    await stop(gateway);
    await pool.query('VACUUM ANALYZE');
    // A temporary slot (dropped with this session) keeps the run's WAL on the server until it is read.
    await admin.connect();
    await admin.query('SET statement_timeout = 0');
    await admin.query(`SELECT pg_create_physical_replication_slot('send_writes_' || pg_backend_pid(), true, true)`);
    await pool.query('CHECKPOINT');
    const before = await snapshot();
    gateway = start('gateway', { PORT: String(gatewayPort), HOST: '127.0.0.1', MAX_EVENT_LOOP_DELAY_MS: '0' });
    await until(async () => (await fetch(`http://127.0.0.1:${gatewayPort}/health/ready`).catch(() => undefined))?.ok === true, 'the gateway', 30000);

    worker = start('push-worker-fcm', {});
    const batches: Request[] = Array.from({ length: Math.ceil(MESSAGES / BATCH_SIZE) }, (_, b) => ({
      path: '/channels/push/batch',
      headers: OPERATOR,
      body: JSON.stringify(Array.from({ length: Math.min(BATCH_SIZE, MESSAGES - b * BATCH_SIZE) }, (_, i) => message(b * BATCH_SIZE + i))),
    }));
    const started = performance.now();
    await each(gatewayPort, 4, batches);
    const settled = async () => Number((await pool.query(`SELECT count(*) FROM messages WHERE status = 'accepted'`)).rows[0].count) === 0;
    await until(settled, 'every message settled');
    const seconds = (performance.now() - started) / 1000;
    await Promise.all([stop(worker), stop(gateway)]);
    const after = await snapshot();

    const accepted = Number((await pool.query(`SELECT count(*) FROM messages`)).rows[0].count);
    const per = (n: number) => (n / accepted).toFixed(2);
    console.log(`send-writes: ${accepted} one-device messages accepted in batches of ${BATCH_SIZE} and settled through the FCM sandbox in ${seconds.toFixed(1)} s`);
    console.log('');
    console.log('| per message | inserts | updates | of which HOT | deletes | row writes |');
    console.log('|---|---|---|---|---|---|');
    const total = { ins: 0, upd: 0, hot: 0, del: 0 };
    const names = Object.keys(after).filter((name) => name !== 'wal');
    for (const name of [...TABLES, ...names.filter((n) => !TABLES.includes(n)).sort()]) {
      const a = after[name];
      const b = before[name] ?? { ins: 0, upd: 0, hot: 0, del: 0 };
      if (!a) continue;
      const d = { ins: a.ins - b.ins, upd: a.upd - b.upd, hot: a.hot - b.hot, del: a.del - b.del };
      if (!d.ins && !d.upd && !d.del) continue;
      for (const key of ['ins', 'upd', 'hot', 'del'] as const) total[key] += d[key];
      console.log(`| ${name} | ${per(d.ins)} | ${per(d.upd)} | ${per(d.hot)} | ${per(d.del)} | ${per(d.ins + d.upd + d.del)} |`);
    }
    console.log(`| all tables | ${per(total.ins)} | ${per(total.upd)} | ${per(total.hot)} | ${per(total.del)} | ${per(total.ins + total.upd + total.del)} |`);
    console.log('');
    console.log(`WAL: ${(Number(after.wal - before.wal) / accepted).toFixed(0)} bytes per message (${after.wal - before.wal} bytes in all, from a CHECKPOINT, every database of the server)`);
    // The server is shared: the records of this database alone, by the table they touch (its indexes and TOAST included).
    const { rows: records } = await admin.query<{ relation: string; records: string; bytes: string; fpi: string }>(
      `WITH files AS (
         SELECT c.relfilenode, COALESCE(p.relname, t.relname, i.relname, c.relname) AS relation
           FROM pg_class c
           LEFT JOIN pg_index x ON x.indexrelid = c.oid LEFT JOIN pg_class i ON i.oid = x.indrelid
           LEFT JOIN pg_class t ON t.reltoastrelid = COALESCE(i.oid, c.oid)
           LEFT JOIN pg_inherits h ON h.inhrelid = COALESCE(t.oid, i.oid, c.oid) LEFT JOIN pg_class p ON p.oid = h.inhparent
          WHERE c.relfilenode <> 0),
       recs AS (
         SELECT r.record_length, r.fpi_length, r.resource_manager || ' ' || split_part(r.record_type, ' ', 1) AS kind, substring(r.block_ref FROM 'rel [0-9]+/' || $3 || '/([0-9]+)')::oid AS file
           FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
          WHERE r.block_ref LIKE '%/' || $3 || '/%')
       SELECT COALESCE(f.relation, 'other') || CASE WHEN $4 THEN ': ' || r.kind ELSE '' END AS relation,
              count(*) AS records, sum(r.record_length) AS bytes, sum(r.fpi_length) AS fpi
         FROM recs r LEFT JOIN files f ON f.relfilenode = r.file GROUP BY 1 ORDER BY 3 DESC`,
      [before.lsn, after.lsn, String(databaseOid), env.WRITES_DETAIL === '1'],
    );
    const commits = after.commits - before.commits;
    let own = 0;
    let images = 0;
    console.log('');
    console.log('| WAL of this database, per message | records | bytes | of which full-page images |');
    console.log('|---|---|---|---|');
    for (const row of records) {
      own += Number(row.bytes);
      images += Number(row.fpi);
      console.log(`| ${row.relation} | ${per(Number(row.records))} | ${per(Number(row.bytes))} | ${per(Number(row.fpi))} |`);
    }
    console.log(`| commits (${per(commits)} per message, about 46 bytes each) | ${per(commits)} | ${per(commits * 46)} | |`);
    console.log(`| all | | ${per(own + commits * 46)} | ${per(images)} |`);
    // A checkpoint during the run (any database's CHECKPOINT, on a shared server) adds full-page images.
    console.log(`| all but full-page images | | ${per(own + commits * 46 - images)} | |`);
  } finally {
    if (worker) await stop(worker);
    await stop(gateway);
    await pool.end();
    await admin.end().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
