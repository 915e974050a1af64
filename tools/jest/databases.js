// The test databases. The schema is built once, by the Prisma CLI, into a template database, and
// again only when prisma/migrations changes (the template's comment holds their checksum). Each
// project's database is cloned from it (CREATE DATABASE ... TEMPLATE, a file copy) the first time
// one of its integration tests starts in a run. A clone does not copy the template's per-database
// settings, so the session defaults the apps rely on (tools/pg-admin.cjs) are set on each clone.
// An advisory lock makes concurrent runs (Nx runs projects in parallel) build the template once and
// clone from it one at a time.
const { createHash } = require('node:crypto');
const { execFileSync } = require('node:child_process');
const { readdirSync, readFileSync } = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const pg = require('pg');
const { applySessionSettings, connectAdmin } = require('../pg-admin.cjs');
const { templateDatabaseUrl } = require('./urls');

const root = path.join(__dirname, '../..');
const migrations = path.join(root, 'prisma/migrations');

const nameOf = (url) => decodeURIComponent(new URL(url).pathname.slice(1));
const quote = (name) => `"${name.replace(/"/g, '""')}"`;

function migrationsChecksum() {
  const hash = createHash('sha256');
  const files = readdirSync(migrations, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(migrations, path.join(entry.parentPath, entry.name)))
    .sort();
  for (const file of files) hash.update(`${file}\0`).update(readFileSync(path.join(migrations, file))).update('\0');
  return hash.digest('hex');
}

async function commentOn(client, name) {
  const { rows } = await client.query("SELECT shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE datname = $1", [name]);
  return rows.length ? (rows[0].comment ?? '') : undefined;
}

async function recreate(client, name, template) {
  await client.query(`DROP DATABASE IF EXISTS ${quote(name)} WITH (FORCE)`);
  await client.query(`CREATE DATABASE ${quote(name)}${template ? ` TEMPLATE ${quote(template)}` : ''}`);
}

async function ensureTemplate(client) {
  const url = templateDatabaseUrl();
  const name = nameOf(url);
  const marker = `migrations ${migrationsChecksum()}`;
  if ((await commentOn(client, name)) === marker) return name;
  await recreate(client, name);
  execFileSync(
    process.execPath,
    ['--input-type=module', '-e', `import { migrate } from './tools/db-migrate.mjs'; migrate(${JSON.stringify(url)});`],
    { cwd: root, stdio: 'inherit' },
  );
  await client.query(`COMMENT ON DATABASE ${quote(name)} IS '${marker}'`);
  return name;
}

/**
 * The day partitions the apps make when they start (libs/db/src/partitions.ts), from yesterday to
 * two days ahead, made the way the bench scripts make them (tools/day-partitions.mjs), so that the
 * tests' rows go where the apps' would (rows of other days go to the default partitions).
 */
async function makeTestDayPartitions(url) {
  const { dayOf, makeDayPartitions } = await import('../day-partitions.mjs');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await makeDayPartitions(client, dayOf(Date.now() - 86_400_000), dayOf(Date.now() + 2 * 86_400_000));
  } finally {
    await client.end();
  }
}

/** Makes the database at `url` a fresh copy of the template, unless this run (`run`) already did. */
async function prepareDatabase(url, run) {
  const client = await connectAdmin(url);
  const lock = nameOf(templateDatabaseUrl());
  await client.query('SELECT pg_advisory_lock(hashtext($1))', [lock]);
  try {
    const name = nameOf(url);
    const marker = `run ${run}`;
    if ((await commentOn(client, name)) === marker) return;
    await recreate(client, name, await ensureTemplate(client));
    await applySessionSettings(client, name);
    await makeTestDayPartitions(url);
    await client.query(`COMMENT ON DATABASE ${quote(name)} IS '${marker}'`);
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lock]).catch(() => {});
    await client.end();
  }
}

function redisAnswers(url) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || 6379) });
    socket.setTimeout(2000);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

module.exports = { prepareDatabase, redisAnswers };
