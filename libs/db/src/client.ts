import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import type { LogSink } from '@operator/config';
import { PrismaClient } from './generated/client';

/** The Prisma client, and the `pg` pool under it for hot-path statements where the ORM's per-query work would dominate. */
export type Db = InstanceType<typeof PrismaClient> & { readonly pool: pg.Pool };
/** The client or an interactive transaction's client: repositories accept either. */
export type DbTx = Omit<Db, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends' | 'pool'>;
export type Sql = pg.Pool | pg.PoolClient;

export interface DbOptions {
  url: string;
  poolSize?: number;
  connectTimeoutMs?: number;
  /** Where a lost connection is reported, once per outage. */
  log?: LogSink;
  /** `postgres`, or `postgres-read` for a replica's pool. */
  store?: string;
}

/**
 * No startup parameters: PgBouncer in transaction mode refuses them. Session limits are the
 * database's defaults (DATABASE_SESSION_SETTINGS in tools/pg-admin.cjs).
 */
export function createDb({ url, poolSize = 10, connectTimeoutMs = 3000, log, store = 'postgres' }: DbOptions): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: connectTimeoutMs,
    idleTimeoutMillis: 30000,
    // A query is written at once, not after the answer to the one before (inTransactionFrom):
    // code that awaits each query runs as it would without.
    pipeline: true,
  });
  watchConnections(pool, log, store);
  const prisma = new PrismaClient({ adapter: releasingFailedTransactions(new PrismaPg(pool)) });
  return Object.assign(prisma, { pool });
}

/**
 * Prisma releases a transaction's connection only after its COMMIT or ROLLBACK succeeds; when that
 * fails the connection would stay checked out for good and drain the pool. Released here, once.
 */
function releasingFailedTransactions(factory: PrismaPg): PrismaPg {
  const connect = factory.connect.bind(factory);
  factory.connect = async () => {
    const adapter = await connect();
    const startTransaction = adapter.startTransaction.bind(adapter);
    adapter.startTransaction = async (isolationLevel) => {
      const transaction = await startTransaction(isolationLevel);
      const executeRaw = transaction.executeRaw.bind(transaction);
      transaction.executeRaw = async (query) => {
        try {
          return await executeRaw(query);
        } catch (error) {
          if (query.sql === 'COMMIT' || query.sql === 'ROLLBACK') await transaction.rollback();
          throw error;
        }
      };
      return transaction;
    };
    return adapter;
  };
  return factory;
}

/**
 * Gives every connection an error listener for its whole life: the pool listens only to idle ones,
 * and a checked-out connection whose server goes away would otherwise end the process.
 */
function watchConnections(pool: pg.Pool, log: LogSink | undefined, store: string) {
  let reported = false;
  const report = (error: Error & { code?: string }) => {
    if (reported) return;
    reported = true;
    log?.warn({ store, err: error.message, code: error.code }, 'PostgreSQL connection lost; reconnecting on the next query');
  };
  pool.on('error', report);
  pool.on('connect', (client) => {
    client.on('error', report);
    if (reported) log?.info({ store }, 'PostgreSQL connection is back');
    reported = false;
  });
}

export async function pingDb(db: Db): Promise<void> {
  await db.pool.query('SELECT 1');
}

export async function closeDb(db: Db): Promise<void> {
  await db.$disconnect();
  await db.pool.end();
}

export function inTransaction<T>(db: Db, work: (sql: pg.PoolClient) => Promise<T>): Promise<T> {
  return transaction(db, async (client) => {
    await client.query('BEGIN');
    return work(client);
  });
}

/**
 * inTransaction for a transaction that starts with the statement `first`: its BEGIN (`begin`,
 * which may name the isolation level) and `first` are written together, without waiting for
 * BEGIN's answer (the pool's connections pipeline), one round trip where two were. Under load a
 * short transaction's time is mostly its round trips, each waiting for the other side to be
 * scheduled. `work` goes on with the first statement's rows.
 */
export function inTransactionFrom<R extends pg.QueryResultRow, T>(
  db: Db,
  begin: 'BEGIN' | 'BEGIN ISOLATION LEVEL SERIALIZABLE',
  first: { text: string; values: unknown[] },
  work: (sql: pg.PoolClient, rows: R[]) => Promise<T>,
): Promise<T> {
  return transaction(db, async (client) => {
    const [, firstResult] = await inOneWrite(client, () => Promise.all([client.query(begin), client.query<R>(first.text, first.values)]));
    return work(client, firstResult.rows);
  });
}

/**
 * Runs `send`, whose queries a pipelining client writes at once, with the connection's socket
 * corked, so that they leave in one write rather than one each. Each write to a waiting server
 * wakes it, and on a busy machine that wake is what a short query costs most.
 */
function inOneWrite<T>(client: pg.PoolClient, send: () => T): T {
  const socket = (client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection?.stream;
  if (typeof socket?.cork !== 'function' || typeof socket.uncork !== 'function') return send();
  socket.cork();
  try {
    return send();
  } finally {
    socket.uncork();
  }
}

/** Runs `run` (which begins the transaction) on a connection of its own, then commits, or rolls back if it threw. */
async function transaction<T>(db: Db, run: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.pool.connect();
  let broken: Error | undefined;
  try {
    const result = await run(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // A ROLLBACK that fails means the connection is gone: the pool must not hand it out again.
    await client.query('ROLLBACK').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}

// "The database cannot serve this now, try again" rather than "this statement is wrong". The
// messages also catch PgBouncer's, which may arrive without a code.
const TRANSIENT_CODES = new Set([
  ...['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN'],
  ...['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2028', 'P2034'],
  ...['57P01', '57P02', '57P03', '57014', '53300', '53400', '40001', '40P01', '55P03', '25006'],
]);
const CONNECTION_EXCEPTION = /^08[0-9A-Z]{3}$/;
const TRANSIENT_KINDS = new Set([
  'DatabaseNotReachable',
  'ConnectionClosed',
  'SocketTimeout',
  'TooManyConnections',
  'TlsConnectionError',
  'TransactionWriteConflict',
  'TransactionAlreadyClosed',
]);
const TRANSIENT_MESSAGES = new RegExp(
  [
    ...['connection terminated', 'is not queryable', 'connection timeout', 'timeout exceeded when trying to connect', "Can't reach database server"],
    ...['ECONNREFUSED', 'ECONNRESET', 'the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)', 'terminating connection'],
    ...['read-only transaction', 'server conn crashed', 'server login has been failing', 'cannot connect to server', 'query_wait_timeout'],
    ...['client_login_timeout', 'server closed the connection unexpectedly', 'no more connections allowed'],
  ].join('|'),
  'i',
);

type ErrorLike = { code?: unknown; originalCode?: unknown; kind?: unknown; message?: unknown; cause?: unknown; meta?: { driverAdapterError?: unknown } };

function someInChain(error: unknown, test: (item: ErrorLike) => boolean): boolean {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length) {
    const item = queue.shift() as ErrorLike | null | undefined;
    if (!item || typeof item !== 'object' || seen.has(item)) continue;
    seen.add(item);
    if (test(item)) return true;
    queue.push(item.cause, item.meta?.driverAdapterError);
  }
  return false;
}

/** The database is unreachable or busy (answer 503, the client retries), not that a query is wrong. */
export function isDbUnavailable(error: unknown): boolean {
  return someInChain(
    error,
    (item) =>
      (typeof item.code === 'string' && (TRANSIENT_CODES.has(item.code) || CONNECTION_EXCEPTION.test(item.code))) ||
      (typeof item.kind === 'string' && TRANSIENT_KINDS.has(item.kind)) ||
      (typeof item.message === 'string' && TRANSIENT_MESSAGES.test(item.message)),
  );
}

// "This server cannot be reached", not "busy": a replica that fails so is passed over (reads.ts).
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'P1001', 'P1002', 'P1017', '57P01', '57P02', '57P03', '53300']);
const CONNECTION_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'TlsConnectionError']);
const CONNECTION_MESSAGES = new RegExp(
  [
    ...['connection terminated', 'is not queryable', 'connection timeout', 'timeout exceeded when trying to connect', "Can't reach database server", 'ECONNREFUSED', 'ECONNRESET'],
    ...['the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)', 'terminating connection', 'server conn crashed'],
    ...['server login has been failing', 'cannot connect to server', 'client_login_timeout', 'server closed the connection unexpectedly', 'no more connections allowed'],
  ].join('|'),
  'i',
);

export function isConnectionFailure(error: unknown): boolean {
  return someInChain(
    error,
    (item) =>
      (typeof item.code === 'string' && (CONNECTION_CODES.has(item.code) || CONNECTION_EXCEPTION.test(item.code))) ||
      (typeof item.kind === 'string' && CONNECTION_KINDS.has(item.kind)) ||
      (typeof item.message === 'string' && CONNECTION_MESSAGES.test(item.message)),
  );
}

/** PostgreSQL refused text it cannot store (a NUL character): the client's mistake. */
export function isUnstorableText(error: unknown): boolean {
  return someInChain(error, (item) => item.code === '22021' || item.code === '22P05' || item.originalCode === '22021' || item.originalCode === '22P05');
}
