// The administrative connection to PostgreSQL, shared by the migration tool (ESM) and the jest
// environment (CommonJS, which cannot import an ES module here).
const pg = require('pg');

/** PostgreSQL could not be reached at all: one line says where, without the URL's credentials. */
class DatabaseUnreachable extends Error {}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/**
 * A client on the server's `postgres` database, as the user of `url`: what creates and drops
 * databases. Throws DatabaseUnreachable when the server cannot be reached at all.
 */
async function connectAdmin(url) {
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
    throw new DatabaseUnreachable(`PostgreSQL is not reachable at ${where}: start it (with Docker: docker compose up -d postgres) or set DATABASE_URL`);
  }
}

module.exports = { connectAdmin, DatabaseUnreachable };
