// `npm run smoke` (the last step of `npm test`): the built apps as separate processes, as
// `npm start` runs them, on a database and queue prefix of their own, with a local receiver standing
// in for the CRM. A device is registered, a push sent and a bonus credited twice; the push must be
// sent (sandbox) and reported, the credit carried out once and reported; every app must stop
// cleanly on SIGTERM.
import { execFileSync, spawn } from 'node:child_process';
import http from 'node:http';
import { APPS } from './apps.mjs';
import { ensureDatabase, migrate } from './db-migrate.mjs';
import { seed } from './seed.mjs';

const DATABASE_URL = process.env.SMOKE_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_smoke';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const results = [];

function check(name, ok, detail = '') {
  results.push({ name, ok });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` (${detail})` : ''}`);
}

async function until(probe, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// The CRM: records every request it receives.
const received = [];
const crm = http.createServer((request, response) => {
  let body = '';
  request.on('data', (chunk) => (body += chunk));
  request.on('end', () => {
    received.push({ path: request.url, body: JSON.parse(body) });
    response.end('ok');
  });
});
await new Promise((resolve) => crm.listen(0, '127.0.0.1', resolve));
const crmUrl = `http://127.0.0.1:${crm.address().port}`;

await ensureDatabase(DATABASE_URL, { recreate: true });
migrate(DATABASE_URL);
await seed(DATABASE_URL);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });

// A port the system hands out free now: a random one can be taken, by a listener or by the local
// end of an outgoing connection (the ephemeral range covers it).
const port = await new Promise((resolve) => {
  const probe = http.createServer().listen(0, '127.0.0.1', () => {
    const { port: free } = probe.address();
    probe.close(() => resolve(free));
  });
});
const base = `http://127.0.0.1:${port}`;
const env = {
  ...process.env,
  NODE_ENV: 'development',
  DATABASE_URL,
  REDIS_URL,
  QUEUE_PREFIX: `smoke-${Date.now()}`,
  HOST: '127.0.0.1',
  PORT: String(port),
  LOG_LEVEL: 'error',
  // Every app but the gateway serves its metrics on a free port of its own.
  METRICS_PORT: '0',
  CRM_STATUS_WEBHOOK_URL: `${crmUrl}/push-status`,
  CRM_EVENTS_BASE_URL: crmUrl,
  WEBHOOK_POLL_MS: '50',
  BONUS_POLL_MS: '50',
};
const apps = APPS.map((name) => {
  const child = spawn(process.execPath, [`dist/apps/${name}/main.js`], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
  return { name, child, exited };
});

const call = async (method, path, key, body, headers = {}) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, json: await response.json().catch(() => undefined) };
};

try {
  check('gateway ready', Boolean(await until(async () => (await fetch(`${base}/health/ready`)).ok)));

  const device = await call('POST', '/v1/devices', 'dev-internal-key', { user_id: 'smoke-1', brand_id: 7, provider: 'fcm', platform: 'android', token: 'smoke-token' });
  check('device registered', device.status === 201, `HTTP ${device.status}`);

  const push = await call('POST', '/channels/push/single', 'dev-operator-key', {
    activity: { id: 1, brand_id: 7, user_id: 'smoke-1', activity_id: 5, action_group_id: 2, trigger_hash: 'smoke', action_id: 3 },
    title: 'Smoke',
    body: 'test',
    meta: { campaign: 'smoke' },
  });
  check('push accepted', push.status === 200 && Boolean(push.json?.push_id), `HTTP ${push.status}`);
  const pushId = push.json?.push_id;
  const sent = await until(async () => (await call('GET', `/channels/push/${pushId}`, 'dev-operator-key')).json?.status === 'sent');
  check('push sent through the FCM worker (sandbox)', Boolean(sent));
  const reported = await until(async () => received.find((r) => r.path === '/push-status' && r.body.push_id === pushId && r.body.status === 'sent'));
  check('sent event posted to the CRM with its meta', reported?.body.meta?.campaign === 'smoke');

  const credit = { user_id: 'smoke-1', bonus_code: 'FREESPINS50' };
  const first = await call('POST', '/bonus/credit', 'dev-operator-key', credit, { 'x-service-id': 'smoke-credit' });
  const again = await call('POST', '/bonus/credit', 'dev-operator-key', credit, { 'x-service-id': 'smoke-credit' });
  check('credit accepted once', first.status === 200 && again.json?.credit_id === first.json?.credit_id);
  const wallet = await until(async () => {
    const { json } = await call('GET', '/v1/players/smoke-1/wallet', 'dev-internal-key');
    return json?.balances?.find((b) => b.key === 'bonus_money' && b.amount === '10.00');
  });
  check('bonus money credited by the bonus app', Boolean(wallet));
  const bonusEvents = await until(async () => {
    const events = received.filter((r) => r.path === '/v1/integration/bonus' && r.body.user_id === 'smoke-1');
    return events.length ? events : undefined;
  });
  await new Promise((resolve) => setTimeout(resolve, 500));
  check('one bonus event posted', bonusEvents?.length === 1 && received.filter((r) => r.path === '/v1/integration/bonus').length === 1);
} finally {
  for (const app of apps) app.child.kill('SIGTERM');
  const codes = await Promise.all(apps.map((app) => Promise.race([app.exited, new Promise((resolve) => setTimeout(() => resolve('hung'), 15000))])));
  apps.forEach((app, i) => check(`${app.name} stopped cleanly on SIGTERM`, codes[i] === 0, String(codes[i])));
  for (const app of apps) app.child.kill('SIGKILL');
  crm.close();
}

const failed = results.filter((r) => !r.ok).length;
console.log(`\nsmoke: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
