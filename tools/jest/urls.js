// Where the tests find PostgreSQL and Redis. TEST_DATABASE_URL names the base: each project's
// integration tests get a database of their own, `<base>_<project>` (operator_api_test_apps_gateway),
// cloned at each run from the migrated template `<base>_template`.
const path = require('node:path');

const root = path.join(__dirname, '../..');

function testUrls() {
  return {
    databaseUrl: process.env.TEST_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_test',
    redisUrl: process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379',
  };
}

function withDatabase(url, suffix) {
  const named = new URL(url);
  named.pathname = `${named.pathname}_${suffix}`;
  return named.toString();
}

/** The database of the project at `rootDir`: its path in the repository makes the name (libs/db: libs_db). */
function projectDatabaseUrl(rootDir) {
  const project = path.relative(root, rootDir).replace(/[^A-Za-z0-9]+/g, '_').toLowerCase() || 'root';
  return withDatabase(testUrls().databaseUrl, project);
}

const templateDatabaseUrl = () => withDatabase(testUrls().databaseUrl, 'template');

module.exports = { testUrls, projectDatabaseUrl, templateDatabaseUrl };
