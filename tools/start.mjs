// `npm start`: migrates the database, builds the apps and runs every one of them, with the
// development defaults of each app's configuration. Ctrl-C (or SIGTERM) stops them all gracefully.
import { spawn, execFileSync } from 'node:child_process';
import { APPS } from './apps.mjs';
import { ensureDatabaseOrExit, migrate, migrationTarget } from './db-migrate.mjs';
import { ensureRedisOrExit } from './redis-check.mjs';
import { seed } from './seed.mjs';

// What the apps refuse at boot (libs/config's NODE_ENVS), refused before anything is done: unset is
// development; a `prod` must not get the development seed.
const nodeEnv = process.env.NODE_ENV || 'development';
if (!['development', 'test', 'production'].includes(nodeEnv)) {
  console.error(`NODE_ENV must be one of development, test, production, got "${nodeEnv}"`);
  process.exit(1);
}
const production = nodeEnv === 'production';

const { url, variable } = migrationTarget();
await ensureDatabaseOrExit(url, variable);
await ensureRedisOrExit(process.env);
migrate(url);
if (!production) await seed(url);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });

// Outside production the gateway serves /metrics, /health, /docs and the queue dashboard on PORT
// (in production on its METRICS_PORT, 9464 unless set); every other app serves /metrics and
// /health on a METRICS_PORT of its own (these, then 9472 on for any other app), unless the
// environment sets one for all (METRICS_PORT=0: each takes a free port).
const KNOWN_PORTS = { 'push-worker-fcm': 9465, 'push-worker-apns': 9466, 'push-worker-webpush': 9467, bonus: 9468, 'webhook-dispatcher': 9469, 'push-worker-hms': 9470, 'push-worker-onesignal': 9471 };
const OTHER_APPS = APPS.filter((name) => name !== 'gateway' && !(name in KNOWN_PORTS));
const METRICS_PORTS = { ...KNOWN_PORTS, ...Object.fromEntries(OTHER_APPS.map((name, index) => [name, 9472 + index])) };
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

// In a terminal, outside production, the apps' JSON log lines are shown as readable lines
// (pino-pretty, a development dependency); in production, or piped to a file or a collector, they
// stay JSON, one object a line. LOG_FORMAT=json keeps them JSON in a terminal too.
const readable = !production && process.stdout.isTTY && process.env.LOG_FORMAT !== 'json';
const pretty = readable ? (await import('pino-pretty')).default : undefined;

for (const name of APPS) {
  const port = metricsPort(name);
  const child = spawn(process.execPath, ['--enable-source-maps', `dist/apps/${name}/main.js`], {
    stdio: ['ignore', pretty ? 'pipe' : 'inherit', 'inherit'],
    env: { ...process.env, APP_NAME: name, ...(port && { METRICS_PORT: port }), ...(name === 'gateway' && gatewayEnv) },
  });
  // pino-pretty writes the lines it makes to this process's stdout itself, one line each, led by the app.
  if (pretty) child.stdout.pipe(pretty({ colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,name', messageFormat: `${name}: {msg}` }));
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

// Ctrl-C, a kill, or the terminal closing: every app is stopped gracefully, none is left behind.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stopAll('SIGTERM'));

const gatewayPort = process.env.PORT || '3000';
/** Where an app serves /metrics and /health: its origin, or undefined when it took a free port. */
const operationsOrigin = (name) => {
  const port = name in METRICS_PORTS ? metricsPort(name) : production ? process.env.METRICS_PORT || '9464' : gatewayPort;
  return port === '0' ? undefined : `http://localhost:${port}`;
};

if (production) {
  const where = (name) => (operationsOrigin(name) ? `${operationsOrigin(name)}/metrics` : 'a free port (its "started" line gives metricsPort)');
  console.log(`metrics (and /health/ready beside them):\n${APPS.map((name) => `  ${name.padEnd(22)} ${where(name)}`).join('\n')}`);
} else {
  await orient();
}

/** Once every app answers /health/ready (or after a minute, naming those that do not), where everything is. */
async function orient() {
  const ready = async (name) => {
    const origin = operationsOrigin(name);
    if (!origin) return true;
    try {
      return (await fetch(`${origin}/health/ready`, { signal: AbortSignal.timeout(1000) })).ok;
    } catch {
      return false;
    }
  };
  const deadline = Date.now() + 60_000;
  let waiting = APPS;
  while (waiting.length && Date.now() < deadline && !stopping) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const answers = await Promise.all(waiting.map(async (name) => [name, await ready(name)]));
    waiting = answers.filter(([, ok]) => !ok).map(([name]) => name);
  }
  if (stopping) return;
  const api = `http://localhost:${gatewayPort}`;
  // Keys the environment sets are its own, and not printed; the development keys are the defaults.
  const operatorKey = process.env.OPERATOR_API_KEYS ? '<a key of OPERATOR_API_KEYS>' : 'dev-operator-key';
  const internalKey = process.env.INTERNAL_API_KEYS || process.env.INTERNAL_ADMIN_KEYS ? '<a key of INTERNAL_ADMIN_KEYS>' : 'dev-internal-key';
  const device = `{"user_id":"p-1","brand_id":7,"provider":"fcm","platform":"android","token":"fcm-token-of-the-phone"}`;
  const push = `{"activity":{"id":1001,"brand_id":7,"user_id":"p-1","activity_id":55,"action_group_id":2,"trigger_hash":"th-1","action_id":3},"title":"Weekend reload","body":"50 free spins are waiting","meta":{"campaign":"weekend"}}`;
  const lines = [
    '',
    waiting.length ? `CRM Operator API started; not ready after a minute: ${waiting.join(', ')} (see their log lines above)` : 'CRM Operator API is ready (development)',
    '',
    `  API                ${api}`,
    `  API documentation  ${api}/docs`,
    `  Queue dashboard    ${api}/admin/queues${gatewayEnv.ADMIN_UI === 'true' ? '' : ' (off: ADMIN_UI is not true)'}`,
    '  Metrics and health',
    ...APPS.map((name) => {
      const origin = operationsOrigin(name);
      return `    ${name.padEnd(22)} ${origin ? `${origin}/metrics   ${origin}/health/ready` : 'a free port (METRICS_PORT=0): its "started" line gives metricsPort'}`;
    }),
    '  API keys (X-Api-Key)',
    `    the CRM's          ${operatorKey}`,
    `    your back end's    ${internalKey}`,
    '  Push workers without credentials run on their sandbox: sends are accepted here and reported as sent.',
    '  A first push (registers a device for player p-1 of brand 7, then sends to it):',
    `    curl -s ${api}/v1/devices -H 'X-Api-Key: ${internalKey}' -H 'Content-Type: application/json' -d '${device}' && echo && curl -s ${api}/channels/push/single -H 'X-Api-Key: ${operatorKey}' -H 'Content-Type: application/json' -d '${push}'`,
    '  Ctrl-C stops everything.',
    '',
  ];
  console.log(lines.join('\n'));
}
