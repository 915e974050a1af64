import { isConnectionFailure, isDbUnavailable } from './client';

/** An error as node-postgres builds it from a server's ErrorResponse. */
const serverError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'FATAL' });
/** The same error as Prisma throws it from the driver adapter: the pg error under meta.driverAdapterError. */
const throughPrisma = (cause: Error) =>
  Object.assign(new Error('Invalid `prisma.delivery.update()` invocation'), { code: 'P2010', meta: { driverAdapterError: Object.assign(new Error('postgres'), { cause }) } });

describe('isDbUnavailable', () => {
  // What PostgreSQL and PgBouncer 1.18 sent in libs/testing's failover rehearsals (PgBouncer's own
  // errors all come as 08P01), and what node-postgres reports for a connection cut under it.
  const outages: [string, Error][] = [
    ['a read-only server (a standby, or a primary being demoted)', serverError('25006', 'cannot execute INSERT in a read-only transaction')],
    ['an administrator or a fast shutdown ending the session', serverError('57P01', 'terminating connection due to administrator command')],
    ['a crash shutdown', serverError('57P02', 'terminating connection due to crash of another server process')],
    ['a server that cannot take connections yet', serverError('57P03', 'the database system is not yet accepting connections')],
    ['a connection failure', serverError('08006', 'connection failure')],
    ['PgBouncer: its server connection died', serverError('08P01', 'server conn crashed?')],
    ['PgBouncer: it cannot log in to its server', serverError('08P01', 'server login has been failing, try again later (server_login_retry)')],
    ['PgBouncer: no server connection in time', serverError('08P01', 'query_wait_timeout')],
    ['PgBouncer: no server at login', serverError('08P01', 'client_login_timeout (server down)')],
    ['node-postgres: the socket closed', new Error('Connection terminated unexpectedly')],
    ['node-postgres: a client after its socket failed', new Error('Client has encountered a connection error and is not queryable')],
    ['a reset socket', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
  ];

  it.each(outages)('is true for %s', (_what, error) => {
    expect(isDbUnavailable(error)).toBe(true);
    expect(isDbUnavailable(throughPrisma(error))).toBe(true);
  });

  const codeOf = (error: Error) => (error as Error & { code?: string }).code;
  it.each(outages.filter(([, error]) => codeOf(error)))('is true for %s by its code alone', (_what, error) => {
    expect(isDbUnavailable({ code: codeOf(error), message: 'no message this classifier knows' })).toBe(true);
  });

  it.each([
    ['a unique violation', serverError('23505', 'duplicate key value violates unique constraint')],
    ['a malformed uuid', serverError('22P02', 'invalid input syntax for type uuid: "x"')],
    ['a syntax error', serverError('42601', 'syntax error at or near "SELEC"')],
    ['a check violation', serverError('23514', 'new row for relation "messages" violates check constraint')],
  ])('is false for %s', (_what, error) => {
    expect(isDbUnavailable(error)).toBe(false);
    expect(isDbUnavailable(throughPrisma(error))).toBe(false);
  });
});

// A replica that fails so is passed over for the primary (reads.ts): only when it cannot be reached,
// not when it is merely busy or a statement of its own failed.
describe('isConnectionFailure', () => {
  it.each([
    ['connections refused', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6432'), { code: 'ECONNREFUSED' })],
    ['no connection within the pool’s timeout', new Error('timeout exceeded when trying to connect')],
    ['a socket closed mid-query', new Error('Connection terminated unexpectedly')],
    ['a server shutting down', serverError('57P01', 'terminating connection due to administrator command')],
    ['a server starting', serverError('57P03', 'the database system is starting up')],
    ['PgBouncer without its server', serverError('08P01', 'server login has been failing, try again later (server_login_retry)')],
  ])('is true for %s', (_what, error) => {
    expect(isConnectionFailure(error)).toBe(true);
    expect(isConnectionFailure(throughPrisma(error))).toBe(true);
  });

  it.each([
    ['a statement timeout', serverError('57014', 'canceling statement due to statement timeout')],
    ['a query cancelled for a conflict with recovery', serverError('40001', 'canceling statement due to conflict with recovery')],
    ['a lock not available', serverError('55P03', 'could not obtain lock on row')],
    ['a syntax error', serverError('42601', 'syntax error at or near "SELEC"')],
  ])('is false for %s', (_what, error) => {
    expect(isConnectionFailure(error)).toBe(false);
  });
});
