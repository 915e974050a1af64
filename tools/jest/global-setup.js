// Runs once before the tests: a fresh, migrated test database, and a check that Redis answers.
const { execFileSync } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const { testUrls } = require('./urls');

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

module.exports = async function globalSetup() {
  if (process.env.OPERATOR_TEST_DB_READY) return;
  const { databaseUrl, redisUrl } = testUrls();
  const root = path.join(__dirname, '../..');
  execFileSync(
    process.execPath,
    ['--input-type=module', '-e', `import { ensureDatabase, migrate } from './tools/db-migrate.mjs'; await ensureDatabase(${JSON.stringify(databaseUrl)}, { recreate: true }); migrate(${JSON.stringify(databaseUrl)});`],
    { cwd: root, stdio: 'inherit' },
  );
  if (!(await redisAnswers(redisUrl))) throw new Error(`Redis does not answer at ${redisUrl}; start it before the tests`);
  process.env.OPERATOR_TEST_DB_READY = '1';
};
