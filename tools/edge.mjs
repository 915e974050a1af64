// `npm run edge [-- --fuzz N]`: the built gateway as it faces the internet in production, tried from
// outside as an attacker would, step by step below. Clients bound to 127.0.0.2, 127.0.0.3, ... stand
// for other machines.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import { ensureDatabase, migrate } from './db-migrate.mjs';
import { check, freePort, refusals, request, results, secret, sleep, startGateway, tally, until } from './edge/client.mjs';
import { floodUnrouted } from './edge/flood.mjs';
import { fuzz } from './edge/fuzz.mjs';
import { seed } from './seed.mjs';

const args = process.argv.slice(2);
const fuzzCount = Number(args[args.indexOf('--fuzz') + 1]) || 100_000;
const DATABASE_URL = process.env.EDGE_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_edge';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

await ensureDatabase(DATABASE_URL, { recreate: true });
migrate(DATABASE_URL);
await seed(DATABASE_URL);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });

const [port, metricsPort] = [await freePort(), await freePort()];
const base = `http://127.0.0.1:${port}`;
const internalBase = `http://127.0.0.1:${metricsPort}`;
const keys = { operator: secret(), device: secret(), admin: secret(), oauthSecret: secret(), basicPassword: secret() };
const env = {
  ...process.env,
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  DATABASE_URL,
  REDIS_URL,
  QUEUE_PREFIX: `edge-${Date.now()}`,
  HOST: '127.0.0.1',
  PORT: String(port),
  METRICS_PORT: String(metricsPort),
  OPERATOR_API_KEYS: keys.operator,
  INTERNAL_API_KEYS: secret(),
  INTERNAL_DEVICE_KEYS: keys.device,
  INTERNAL_ADMIN_KEYS: keys.admin,
  CRM_AUTH: 'api-key,basic,oauth2',
  CRM_BASIC_USERS: `crm:${keys.basicPassword}`,
  CRM_OAUTH_CLIENTS: `crm-edge:${keys.oauthSecret}`,
  CRM_OAUTH_SIGNING_KEYS: secret(),
  TRACKING_SECRET: secret(),
  CRM_WEBHOOK_SECRET: secret(),
};
delete env.ADMIN_UI;

// 1. A weak key stops the start, naming the variable.
{
  const weak = startGateway({ ...env, OPERATOR_API_KEYS: 'k' });
  const how = await Promise.race([weak.exited, sleep(20000).then(() => 'still running')]);
  if (how === 'still running') weak.child.kill('SIGKILL');
  check('a one-character OPERATOR_API_KEYS stops a production start, naming the variable', how !== 0 && how !== 'still running' && /OPERATOR_API_KEYS/.test(weak.output()), `exit ${how}`);
}

const gateway = startGateway(env);
if (!(await until(async () => (await request(base, '/health/ready')).status === 200))) {
  console.log(gateway.output().slice(-3000));
  check('the production gateway becomes ready', false);
  process.exit(1);
}

// 2. Operations off the public port.
{
  const onPublic = await Promise.all(['/metrics', '/docs', '/openapi.json', '/admin/queues'].map(async (path) => [path, (await request(base, path)).status]));
  check('/metrics, /docs, /openapi.json and /admin/queues answer 404 on PORT', onPublic.every(([, status]) => status === 404), onPublic.map(([p, s]) => `${p} ${s}`).join(', '));
  const metrics = await request(internalBase, '/metrics');
  check('/metrics answers on METRICS_PORT', metrics.status === 200 && metrics.text.includes('# TYPE'), `status ${metrics.status}`);
  const dashboard = await request(internalBase, '/admin/queues', { headers: { 'x-api-key': keys.admin } });
  check('no queue dashboard unless ADMIN_UI=true', dashboard.status === 404, `status ${dashboard.status}`);
}

// 3. Scoped internal keys.
{
  const json = (key) => ({ 'x-api-key': key, 'content-type': 'application/json' });
  const device = { user_id: 'edge-player', brand_id: 7, provider: 'fcm', platform: 'android', token: `edge-${randomBytes(40).toString('hex')}` };
  const registered = await request(base, '/v1/devices', { method: 'POST', headers: json(keys.device), body: JSON.stringify(device) });
  const refused = await request(base, '/v1/credits', { headers: json(keys.device) });
  const read = await request(base, '/v1/credits', { headers: json(keys.admin) });
  check(
    'a device key registers a device and is refused on GET /v1/credits; an admin key reads it',
    [200, 201].includes(registered.status) && [401, 403].includes(refused.status) && typeof refused.json?.error === 'string' && read.status === 200,
    `register ${registered.status}, credits with the device key ${refused.status}, with the admin key ${read.status}`,
  );
}

// 4. Small bodies on the open routes.
{
  const big = JSON.stringify({ event: 'opened', tracking_token: 'x'.repeat(64 * 1024) });
  const tracking = await request(base, `/v1/push/${randomUUID()}/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
  const token = await request(base, '/oauth/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `grant_type=client_credentials&x=${'y'.repeat(64 * 1024)}` });
  check(
    'a 64 KiB body to the tracking route and to /oauth/token is answered 413 {"error"}',
    tracking.status === 413 && typeof tracking.json?.error === 'string' && token.status === 413 && typeof token.json?.error === 'string',
    `tracking ${tracking.status}, token ${token.status}`,
  );
}

// 5. No client secret in a query string.
{
  const answer = await request(base, `/oauth/token?grant_type=client_credentials&client_id=crm-edge&client_secret=${keys.oauthSecret}`);
  check('GET /oauth/token with the secret in the query is not served', answer.status === 404 || answer.status === 405, `status ${answer.status}`);
}

// 6. A trickling request is cut off (run beside the rest: it takes tens of seconds).
const trickle = new Promise((resolve) => {
  const started = Date.now();
  const socket = net.connect(port, '127.0.0.1', () => {
    socket.write(`POST /bonus/credit HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ${keys.operator}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{`);
  });
  const timer = setInterval(() => socket.write(' '), 3000);
  const done = (how) => {
    clearInterval(timer);
    socket.destroy();
    resolve({ ms: Date.now() - started, how });
  };
  socket.on('data', (chunk) => done(`answered ${String(chunk).split('\r\n')[0]}`));
  socket.on('close', () => done('closed'));
  socket.on('error', () => done('closed'));
  setTimeout(() => done('still open'), 60_000);
});

// 7. A duplicate key smuggling a deep value.
const creditHeaders = () => ({
  'x-api-key': keys.operator,
  'content-type': 'application/json',
  'x-service-id': `edge-${randomUUID()}`,
  'x-service-activityid': '900',
  'x-service-actionid': '3',
  'x-service-actiongroupid': '2',
  'x-service-actioncommunicationprofileid': '9',
  'x-service-triggerhash': `th-${randomUUID()}`,
});
/** A single push the gateway accepts (the device of step 3 is its player's). */
const validPush = () => ({
  activity: { id: Math.floor(Math.random() * 1e12), brand_id: 7, user_id: 'edge-player', activity_id: 1, action_group_id: 1, trigger_hash: 'x', action_id: 1 },
  title: 'T',
  body: 'B',
});
{
  const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
  const body = `{"user_id":"edge-player","bonus_code":${deep},"bonus_code":"WELCOME"}`;
  const answer = await request(base, '/bonus/credit', { method: 'POST', headers: creditHeaders(), body });
  check('a credit with bonus_code twice, the first nested 100,000 levels deep, is answered 400 {"error"}', answer.status === 400 && typeof answer.json?.error === 'string', `status ${answer.status}: ${answer.text.slice(0, 120)}`);
}

// 8. Failed authentications are throttled per address, and never refuse the CRM's right credentials.
const basicOf = (user, password) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const tokenForm = (secretValue) => `grant_type=client_credentials&client_id=crm-edge&client_secret=${encodeURIComponent(secretValue)}`;
const tokenRequest = (secretValue, localAddress) =>
  request(base, '/oauth/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: tokenForm(secretValue), localAddress });
const throttled = (answer) => answer.status === 503 && Number(answer.headers['retry-after']) > 0;
/** Never a 4xx to the right credential: a 2xx, or a 503 with Retry-After the CRM retries. */
const servedOrRetried = (answer) => (answer.status >= 200 && answer.status < 300) || throttled(answer);
async function sequential(count, call) {
  const answers = [];
  for (let i = 0; i < count; i += 1) answers.push(await call(i));
  return answers;
}
{
  const basicHeaders = (password, extra = {}) => ({ authorization: basicOf('crm', password), ...extra });
  const wrong = await sequential(20, () => request(base, '/bonus/list', { headers: basicHeaders(secret()), localAddress: '127.0.0.2' }));
  const list = await request(base, '/bonus/list', { headers: basicHeaders(keys.basicPassword), localAddress: '127.0.0.3' });
  const funds = await request(base, '/bonus/credit/funds', {
    method: 'POST',
    headers: basicHeaders(keys.basicPassword, Object.fromEntries(Object.entries(creditHeaders()).filter(([name]) => name !== 'x-api-key'))),
    body: JSON.stringify({ user_id: 'edge-player', amount: 5, currency: 'EUR', type: 'cashback' }),
    localAddress: '127.0.0.3',
  });
  const guess = await request(base, '/bonus/list', { headers: basicHeaders(secret()), localAddress: '127.0.0.2' });
  const rightFromAttacker = await request(base, '/bonus/list', { headers: basicHeaders(keys.basicPassword), localAddress: '127.0.0.2' });
  check(
    "20 wrong Basic passwords for `crm` from 127.0.0.2: the CRM's right password from 127.0.0.3 is served (/bonus/list, POST /bonus/credit/funds), the 21st guess meets 503 with Retry-After",
    wrong.every((answer) => answer.status === 401) && list.status === 200 && funds.status >= 200 && funds.status < 300 && throttled(guess) && servedOrRetried(rightFromAttacker),
    `wrong: ${tally(wrong)}; list ${list.status}, funds ${funds.status}; 21st guess ${guess.status} Retry-After ${guess.headers?.['retry-after']}; the right password from 127.0.0.2 ${rightFromAttacker.status}`,
  );
}
{
  const wrong = await sequential(20, () => tokenRequest(secret(), '127.0.0.4'));
  const right = await tokenRequest(keys.oauthSecret, '127.0.0.3');
  const guess = await tokenRequest(secret(), '127.0.0.4');
  const rightFromAttacker = await tokenRequest(keys.oauthSecret, '127.0.0.4');
  check(
    "20 wrong secrets for the OAuth client from 127.0.0.4: the CRM's token request from 127.0.0.3 is served, the 21st guess meets 503 with Retry-After",
    wrong.every((answer) => answer.status === 401) && right.status === 200 && typeof right.json?.access_token === 'string' && throttled(guess) && servedOrRetried(rightFromAttacker),
    `wrong: ${tally(wrong)}; right ${right.status}; 21st guess ${guess.status} Retry-After ${guess.headers?.['retry-after']}; the right secret from 127.0.0.4 ${rightFromAttacker.status}`,
  );
}
{
  // An address the CRM shares with others (a proxy, an ingress without TRUST_PROXY).
  const garbage = await sequential(20, () => request(base, '/bonus/list', { headers: { 'x-api-key': secret() }, localAddress: '127.0.0.5' }));
  const right = await request(base, '/bonus/list', { headers: { 'x-api-key': keys.operator }, localAddress: '127.0.0.5' });
  const push = await request(base, '/channels/push/single', { method: 'POST', headers: creditHeaders(), body: JSON.stringify(validPush()), localAddress: '127.0.0.5' });
  check(
    '20 garbage keys through a shared address: the right key through it is still served (2xx or 503 with Retry-After, never 4xx)',
    garbage.every((answer) => answer.status === 401) && servedOrRetried(right) && servedOrRetried(push),
    `garbage: ${tally(garbage)}; the right key: /bonus/list ${right.status}, a push ${push.status}`,
  );
}
{
  // The CRM rotates its key with 25 requests in flight on the retired one.
  const retired = secret();
  const inFlight = await Promise.all(Array.from({ length: 25 }, () => request(base, '/bonus/list', { headers: { 'x-api-key': retired }, localAddress: '127.0.0.6' })));
  const next = await request(base, '/bonus/list', { headers: { 'x-api-key': keys.operator }, localAddress: '127.0.0.6' });
  const push = await request(base, '/channels/push/single', { method: 'POST', headers: creditHeaders(), body: JSON.stringify(validPush()), localAddress: '127.0.0.6' });
  check(
    '25 requests in flight on a retired key, then the new key from the same address: served at once',
    inFlight.every((answer) => answer.status === 401 || throttled(answer)) && servedOrRetried(next) && servedOrRetried(push),
    `retired key: ${tally(inFlight)}; the new key: /bonus/list ${next.status}, a push ${push.status}`,
  );
}

// 9. Unauthenticated 5 MiB bodies to unrouted paths (tools/edge/flood.mjs).
await floodUnrouted({ base, creditHeaders, validPush });

// 10. Fuzzed requests (tools/edge/fuzz.mjs).
await fuzz({ base, count: fuzzCount, creditHeaders, validPush, gatewayPid: gateway.child.pid });

{
  const { ms, how } = await trickle;
  check('a request whose body trickles in at a byte every 3 s is cut off within 45 s', how !== 'still open' && ms <= 45_000, `${how} after ${(ms / 1000).toFixed(1)} s`);
}

check(
  'every 4xx and 5xx answer of the run is exactly {"error": string, "code": its status}',
  refusals.seen > 0 && refusals.bad === 0,
  `${refusals.seen} refusals read${refusals.bad ? `; ${refusals.bad} misshapen, first: ${refusals.first.join(' | ')}` : ''}`,
);

gateway.child.kill('SIGTERM');
const how = await Promise.race([gateway.exited, sleep(30000).then(() => 'still running')]);
check('the gateway stops on SIGTERM', how === 0, `exit ${how}`);

const failed = results.filter((r) => !r.ok).length;
console.log(`\nedge: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
