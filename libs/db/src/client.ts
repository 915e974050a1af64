import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/client';

export type Db = InstanceType<typeof PrismaClient>;
/** The client or an interactive transaction's client: repositories accept either. */
export type DbTx = Omit<Db, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

export interface DbOptions {
  url: string;
  poolSize?: number;
  /** How long to wait for a connection before failing (and answering 503). */
  connectTimeoutMs?: number;
  /** Longest a single statement may run. */
  statementTimeoutMs?: number;
}

export function createDb({ url, poolSize = 10, connectTimeoutMs = 3000, statementTimeoutMs = 10000 }: DbOptions): Db {
  const adapter = new PrismaPg({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: connectTimeoutMs,
    statement_timeout: statementTimeoutMs,
    idleTimeoutMillis: 30000,
  });
  return new PrismaClient({ adapter });
}

// Error codes of the pg driver and of Prisma that mean "the database cannot be reached right now",
// as opposed to a statement that is wrong.
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'P1001',
  'P1002',
  'P1008',
  'P1017',
  'P2024',
  'P2028',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08003',
  '08006',
  '08001',
  '08004',
]);
const UNAVAILABLE_MESSAGES = /connection terminated|connection timeout|timeout exceeded when trying to connect|ECONNREFUSED|ECONNRESET|Client has encountered a connection error|the database system is (starting up|shutting down)|terminating connection/i;

/** True when an error says the database is unreachable or going away (retry later), not that a query is wrong. */
export function isDbUnavailable(error: unknown): boolean {
  for (let cause: unknown = error, depth = 0; cause && depth < 5; depth++) {
    const { code, message, cause: next, originalCode } = cause as { code?: unknown; message?: unknown; cause?: unknown; originalCode?: unknown };
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    if (typeof originalCode === 'string' && UNAVAILABLE_CODES.has(originalCode)) return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)) return true;
    cause = next;
  }
  return false;
}
