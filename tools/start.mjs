// `npm start`: migrates the database, builds the apps and runs every one of them, with the
// development defaults of each app's configuration. Ctrl-C (or SIGTERM) stops them all gracefully.
import { spawn, execFileSync } from 'node:child_process';
import { APPS } from './apps.mjs';
import { ensureDatabaseOrExit, migrate, migrationTarget } from './db-migrate.mjs';
import { ensureRedisOrExit } from './redis-check.mjs';
import { seed } from './seed.mjs';

const { url, variable } = migrationTarget();
await ensureDatabaseOrExit(url, variable);
await ensureRedisOrExit(process.env);
migrate(url);
if (process.env.NODE_ENV !== 'production') await seed(url);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });

// Outside production the gateway serves /metrics, /health, /docs and the queue dashboard on PORT
// (in production on its METRICS_PORT, 9464 unless set); every other app serves /metrics and
// /health on a METRICS_PORT of its own, unless the environment sets one for all (METRICS_PORT=0:
// each takes a free port).
const production = process.env.NODE_ENV === 'production';
const METRICS_PORTS = { 'push-worker-fcm': 9465, 'push-worker-apns': 9466, 'push-worker-webpush': 9467, bonus: 9468, 'webhook-dispatcher': 9469, 'push-worker-hms': 9470, 'push-worker-onesignal': 9471 };
const metricsPort = (name) => (name in METRICS_PORTS ? (process.env.METRICS_PORT || String(METRICS_PORTS[name])) : undefined);
// The queue dashboard is off by default; on here, for the developer at hand, unless the environment says.
const gatewayEnv = production ? {} : { ADMIN_UI: process.env.ADMIN_UI || 'true' };

const children = new Map();
let stopping = false;

function stopAll(signal) {
  if (stopping) return;
  stopping = true;
  for (const child of children.values()) child.kill(signal);
}

for (const name of APPS) {
  const port = metricsPort(name);
  const child = spawn(process.execPath, ['--enable-source-maps', `dist/apps/${name}/main.js`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, APP_NAME: name, ...(port && { METRICS_PORT: port }), ...(name === 'gateway' && gatewayEnv) },
  });
  children.set(name, child);
  child.on('exit', (code, signal) => {
    children.delete(name);
    if (!stopping) {
      console.error(`${name} exited (${signal ?? code}); stopping the stack`);
      process.exitCode = 1;
      stopAll('SIGTERM');
    }
    if (children.size === 0) process.exit(process.exitCode ?? 0);
  });
}

const where = (name) => {
  const gatewayPort = production ? process.env.METRICS_PORT || '9464' : process.env.PORT || '3000';
  const port = name in METRICS_PORTS ? metricsPort(name) : gatewayPort;
  return port === '0' ? 'a free port (its "started" line gives metricsPort)' : `http://localhost:${port}/metrics`;
};
console.log(`metrics (and /health/ready beside them):\n${APPS.map((name) => `  ${name.padEnd(20)} ${where(name)}`).join('\n')}`);

process.on('SIGINT', () => stopAll('SIGTERM'));
process.on('SIGTERM', () => stopAll('SIGTERM'));
