// The administrative connection to PostgreSQL, shared by the migration tool (ESM) and the jest
// environment (CommonJS, which cannot import an ES module here).
const pg = require('pg');

/** PostgreSQL could not be reached at all: one line says where, without the URL's credentials. */
class DatabaseUnreachable extends Error {}
/** A URL the tools cannot use as given: one line says why, without the URL's credentials. */
class DatabaseUrlRefused extends Error {}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/**
 * The session defaults every connection gets, whatever pools it: set on the database, since
 * PgBouncer in transaction mode refuses (or silently drops) most startup parameters. No JIT: every
 * statement of the apps is short, and an overestimated cost would spend seconds compiling a plan
 * that runs in a millisecond.
 */
const DATABASE_SESSION_SETTINGS = { statement_timeout: '10s', idle_in_transaction_session_timeout: '40s', jit: 'off' };

/** What the migration's own connection overrides: a migration may run (and hold a lock) for long. */
const MIGRATION_SESSION_OPTIONS = '-c statement_timeout=0 -c idle_in_transaction_session_timeout=0';

const quoteIdentifier = (name) => `"${name.replace(/"/g, '""')}"`;

/** Sets DATABASE_SESSION_SETTINGS on the database `name` (new sessions get them), through an admin client. */
async function applySessionSettings(client, name) {
  for (const [setting, value] of Object.entries(DATABASE_SESSION_SETTINGS)) {
    await client.query(`ALTER DATABASE ${quoteIdentifier(name)} SET ${setting} = '${value}'`);
  }
}

/** `url` with `-c` options of its own for the session, after any the URL already gives. */
function withSessionOptions(url, options) {
  const parsed = new URL(url);
  const given = parsed.searchParams.get('options');
  parsed.searchParams.set('options', given ? `${given} ${options}` : options);
  return parsed.toString();
}

/**
 * Why a PostgreSQL URL that lists several hosts (libpq's `postgresql://h1,h2/db` or `?host=h1,h2`)
 * is refused, in one line; undefined for a URL with one host. node-postgres connects to one host:
 * such a URL fails as "Invalid URL", or as a host name that does not resolve.
 */
function multiHostProblem(name, url) {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url)?.[1] ?? '';
  const hosts = authority.slice(authority.lastIndexOf('@') + 1);
  const query = url.includes('?') ? url.slice(url.indexOf('?') + 1).split('#')[0] : '';
  const hostParameter = new URLSearchParams(query).get('host') ?? '';
  if (!hosts.includes(',') && !hostParameter.includes(',')) return undefined;
  return `${name} lists several hosts, and the PostgreSQL driver connects to one: give one address that always reaches the primary (PgBouncer, HAProxy with Patroni, CloudNativePG's -rw Service, a managed database's writer endpoint)`;
}

/** Throws DatabaseUrlRefused when `url` (the variable `name`) lists several hosts. */
function checkDatabaseUrl(name, url) {
  const problem = multiHostProblem(name, url);
  if (problem) throw new DatabaseUrlRefused(problem);
}

/**
 * A client on the server's `postgres` database, as the user of `url`: what creates and drops
 * databases. Throws DatabaseUnreachable when the server cannot be reached at all.
 */
async function connectAdmin(url, name = 'DATABASE_URL') {
  checkDatabaseUrl(name, url);
  const target = new URL(url);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    return client;
  } catch (error) {
    if (!UNREACHABLE.has(error.code) && !/timeout|connection terminated/i.test(error.message)) throw error;
    const where = `${target.hostname || 'localhost'}:${target.port || 5432}`;
    throw new DatabaseUnreachable(`PostgreSQL is not reachable at ${where}: start it (with Docker: docker compose up -d postgres) or set ${name}`);
  }
}

module.exports = {
  connectAdmin,
  DatabaseUnreachable,
  DatabaseUrlRefused,
  DATABASE_SESSION_SETTINGS,
  MIGRATION_SESSION_OPTIONS,
  applySessionSettings,
  withSessionOptions,
  multiHostProblem,
  checkDatabaseUrl,
};
