// `npm run chaos -- --hostile [--proxy]`: the service among push services and a wallet that turn
// bad. With --proxy every peer is named by a host only the proxy resolves, so no connection can
// go around it.
import { readFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeCrm, fcmToken, apnsToken, hmsToken, oneSignalSubscriptionId, seededRandom, startConnectProxy, testTls, type ConnectProxy } from '@operator/testing';
import { App, type Exit } from './apps';
import type { Check } from './checks';
import { BRAND_ID, CrmDriver, INTERNAL_KEY, type ChaosCredit } from './crm';
import { Providers } from './providers';
import { freshDatabase, query } from './stores';
import { sleep } from './util';
import { APPS, appEnv, printChecks, until } from './workload';

const args = process.argv.slice(2);
const viaProxy = args.includes('--proxy');
const keep = args.includes('--keep');
const PLAYERS = 300;
const SEND_TIMEOUT_MS = 5000;
const BATCH_GAP_MS = 20_000;
const DELIVERY_WINDOW_MS = 60_000;
const RSS_LIMIT_MB = 300;
const dir = mkdtempSync(join(tmpdir(), 'operator-hostile-'));
const apps: App[] = [];
const closers: (() => Promise<unknown>)[] = [];
const log = (text: string) => console.log(`chaos: ${text}`);

async function exit(code: number): Promise<never> {
  for (const app of apps) app.killNow();
  await Promise.allSettled(closers.reverse().map((close) => close()));
  if (!keep) rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void exit(130));
setTimeout(() => {
  console.error('chaos: hard timeout after 300 s');
  console.log('\nchaos: 0 passed, 1 failed');
  void exit(1);
}, 300_000).unref();

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Counts its connections and requests. */
async function server(handler: Handler, secure = true) {
  const tls = testTls();
  const sockets = new Set<Socket>();
  let connections = 0;
  let requests = 0;
  const counted: Handler = (req, res) => {
    requests += 1;
    res.on('error', () => undefined);
    handler(req, res);
  };
  const instance = secure ? https.createServer({ key: tls.key, cert: tls.cert }, counted) : http.createServer(counted);
  instance.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => instance.listen(0, '127.0.0.1', resolve));
  const { port } = instance.address() as AddressInfo;
  const close = () => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => instance.close(() => resolve()));
  };
  closers.push(close);
  return { port, connections: () => connections, requests: () => requests };
}

const HOSTILE: Record<string, (internal: string) => Handler> = {
  'rate-limited': () => (_req, res) => res.writeHead(429, { 'retry-after': '3600' }).end('{"reason":"slow down"}'),
  unavailable: () => (_req, res) => res.writeHead(503, { 'retry-after': '3600' }).end('<html>down for maintenance</html>'),
  // The status line, then the headers a byte every 2 s: never a complete answer.
  trickle: () => (_req, res) => {
    const socket = res.socket!;
    socket.write('HTTP/1.1 201 Created\r\nX-Slow: ');
    const timer = setInterval(() => socket.write('a'), 2000);
    socket.on('close', () => clearInterval(timer));
  },
  huge: () => (_req, res) => {
    const chunk = Buffer.alloc(1 << 20, 'x');
    let left = 200;
    res.writeHead(200, { 'content-length': String(left * chunk.length) });
    const write = () => {
      while (left > 0) {
        left -= 1;
        if (!res.write(chunk)) return void res.once('drain', write);
      }
      res.end();
    };
    write();
  },
  unauthorized: () => (_req, res) => res.writeHead(401).end('{"reason":"VAPID credentials refused"}'),
  forbidden: () => (_req, res) => res.writeHead(403).end('{"reason":"VAPID key does not match the subscription"}'),
  redirect: (internal) => (_req, res) => res.writeHead(301, { location: `${internal}/latest/meta-data/` }).end(),
};

function rssMb(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return line ? Number(line[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

async function main(): Promise<number> {
  const started = Date.now();
  log(`hostile endpoints run${viaProxy ? ' through a proxy that tunnels to 443 only' : ''}: ${PLAYERS} players + ${Object.keys(HOSTILE).length} hostile subscriptions; files in ${dir}`);
  const databaseUrl = (process.env.CHAOS_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/operator_api_hostile').replace(/\/[^/]*$/, `/operator_api_hostile${viaProxy ? '_proxy' : ''}`);
  freshDatabase(databaseUrl);

  // What must never be reached: an internal service (https and http), where the redirects point.
  const internal = await server((_req, res) => res.writeHead(200).end('{"secret":"instance credentials"}'));
  const internalHttp = await server((_req, res) => res.writeHead(200).end('{"reference":"NOT-A-CREDIT"}'), false);
  const internalOrigin = `https://127.0.0.1:${internal.port}`;
  const providers = await Providers.start(dir);
  closers.push(() => providers.close());
  const crm = await FakeCrm.start();
  closers.push(() => crm.close());
  const wallet = await server((_req, res) => res.writeHead(301, { location: `http://127.0.0.1:${internalHttp.port}/credits` }).end(), false);
  const hostile = new Map<string, { port: number; requests: () => number }>();
  for (const [name, handler] of Object.entries(HOSTILE)) hostile.set(name, await server(handler(internalOrigin)));

  // Where each origin is, as the apps name it: local addresses, or (through the proxy) names only the proxy resolves.
  const hostileOrigin = (name: string) => (viaProxy ? `https://${name}.push.example.test` : `https://127.0.0.1:${hostile.get(name)!.port}`);
  const normalOrigin = viaProxy ? 'https://push.example.test' : providers.webpush.origin;
  let proxy: ConnectProxy | undefined;
  if (viaProxy) {
    const local = (port: number) => `127.0.0.1:${port}`;
    const map = new Map<string, string>([
      ['fcm.googleapis.com:443', local(providers.fcm.port)],
      ['oauth2.googleapis.com:443', local(providers.fcm.port)],
      ['api.sandbox.push.apple.com:443', local(providers.apns.port)],
      ['oauth-login.cloud.huawei.com:443', local(providers.hms.port)],
      ['push-api.cloud.huawei.com:443', local(providers.hms.port)],
      ['api.onesignal.com:443', local(providers.onesignal.port)],
      ['push.example.test:443', new URL(providers.webpush.origin).host],
      ['crm.example.test:80', new URL(crm.origin).host],
      ['wallet.example.test:80', local(wallet.port)],
      ...[...hostile].map(([name, { port }]) => [`${name}.push.example.test:443`, local(port)] as [string, string]),
    ]);
    // As Squid runs by default: CONNECT to 443 only; the CRM and the wallet (http://) in absolute form.
    proxy = await startConnectProxy({ credentials: { username: 'egress', password: 'chaos' }, connectPorts: [443], resolve: (target) => map.get(target) });
    closers.push(() => proxy!.close());
  }

  const port = (await new Promise<number>((resolve) => {
    const probe = http.createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as AddressInfo;
      probe.close(() => resolve(free));
    });
  })) as number;
  const base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...appEnv(providers, crm, `hostile${viaProxy ? 'p' : ''}${Date.now()}`),
    LOG_LEVEL: 'info',
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    PUSH_SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS),
    WEBPUSH_ALLOWED_ORIGINS: [normalOrigin, ...[...hostile.keys()].map(hostileOrigin)].join(','),
    BONUS_PLATFORM_URL: viaProxy ? 'http://wallet.example.test/credits' : `http://127.0.0.1:${wallet.port}/credits`,
  };
  if (viaProxy) {
    Object.assign(env, {
      HTTPS_PROXY: proxy!.url,
      HTTP_PROXY: proxy!.url,
      NO_PROXY: '',
      CRM_STATUS_WEBHOOK_URL: 'http://crm.example.test/push-status',
      CRM_EVENTS_BASE_URL: 'http://crm.example.test',
      APNS_HOST: '',
      APNS_PORT: '443',
    });
    delete env.FCM_ENDPOINT;
    delete env.HMS_ENDPOINT;
    delete env.ONESIGNAL_ENDPOINT;
  }
  mkdirSync(join(dir, 'logs'));
  const crashes: Exit[] = [];
  for (const name of APPS) apps.push(new App(name, env, join(dir, 'logs'), (exit) => crashes.push(exit)));
  for (const app of apps) app.start();
  if (!(await until(async () => (await fetch(`${base}/health/ready`)).ok, 30000))) throw new Error('the gateway did not become ready');
  const peakRss = new Map<string, number>();
  const sampler = setInterval(() => {
    for (const app of apps) peakRss.set(app.name, Math.max(peakRss.get(app.name) ?? 0, rssMb(app.pid)));
  }, 250);

  // The players: 300 normal, one per hostile origin, and a few with FCM and APNs devices.
  const driver = new CrmDriver(base, seededRandom(1), () => Date.now() + 120_000);
  const register = async (registration: Record<string, unknown>) => (await driver.call('/v1/devices', registration, {}, INTERNAL_KEY)).status;
  const subscriptionAt = (origin: string, id: string) => {
    const { keys } = providers.webpush.subscription(id);
    return { endpoint: `${origin}/push/${id}`, keys };
  };
  const players: string[] = [];
  const refusedRegistrations: string[] = [];
  for (let i = 0; i < PLAYERS; i += 1) {
    const userId = `player-${i}`;
    players.push(userId);
    const status = await register({ user_id: userId, brand_id: BRAND_ID, provider: 'webpush', platform: 'web', subscription: subscriptionAt(normalOrigin, userId) });
    if (status !== 201 && status !== 200) refusedRegistrations.push(`${userId}: ${status}`);
  }
  for (const name of hostile.keys()) {
    players.push(`hostile-${name}`);
    const status = await register({ user_id: `hostile-${name}`, brand_id: BRAND_ID, provider: 'webpush', platform: 'web', subscription: subscriptionAt(hostileOrigin(name), `hostile-${name}`) });
    if (status !== 201 && status !== 200) refusedRegistrations.push(`hostile-${name}: ${status}`);
  }
  const nativeTokens = { fcm: fcmToken(), apns: apnsToken(), hms: hmsToken(), onesignal: oneSignalSubscriptionId() };
  await register({ user_id: 'player-0', brand_id: BRAND_ID, provider: 'fcm', platform: 'android', token: nativeTokens.fcm });
  await register({ user_id: 'player-1', brand_id: BRAND_ID, provider: 'apns', platform: 'ios', token: nativeTokens.apns });
  await register({ user_id: 'player-3', brand_id: BRAND_ID, provider: 'hms', platform: 'android', token: nativeTokens.hms });
  await register({ user_id: 'player-4', brand_id: BRAND_ID, provider: 'onesignal', platform: 'ios', token: nativeTokens.onesignal });
  // Outside the list: another local port, the cloud metadata address, user info, plain http.
  const outside = [`https://127.0.0.1:${internal.port}`, 'https://169.254.169.254', `https://user:pw@${normalOrigin.replace('https://', '')}`, normalOrigin.replace('https:', 'http:')];
  const outsideAnswers = await Promise.all(outside.map(async (origin) => [origin, await register({ user_id: 'intruder', brand_id: BRAND_ID, provider: 'webpush', platform: 'web', subscription: subscriptionAt(origin, 'intruder') })] as const));
  log(`${players.length} players registered (${((Date.now() - started) / 1000).toFixed(1)} s of setup)`);

  const credit: ChaosCredit = { serviceId: `hostile-credit-${Date.now()}`, brand: 1, kind: 'funds', userId: 'player-2', amountMinor: 500, body: { user_id: 'player-2', amount: 5, currency: 'EUR', type: 'cashback' } };
  await driver.credit(credit);
  const creditSentAt = Date.now();

  const rounds: { answeredAt: number; pushIds: Map<string, string> }[] = [];
  let activity = 1000;
  const sendRound = async (round: number) => {
    const pushIds = new Map<string, string>();
    let answeredAt = 0;
    for (let i = 0; i < players.length; i += 100) {
      const bodies = players.slice(i, i + 100).map((userId) => ({
        activity: { id: (activity += 1), brand_id: BRAND_ID, user_id: userId, activity_id: 55, action_group_id: 2, trigger_hash: `th-${round}-${userId}`, action_id: 3 },
        title: `Round ${round}`,
        body: 'Your free spins are waiting',
        meta: { round, userId },
      }));
      const answer = await driver.call('/channels/push/batch', bodies);
      answeredAt = Date.now();
      if (answer.status !== 200) throw new Error(`batch answered ${answer.status}`);
      for (const entry of answer.json?.successful ?? []) {
        const body = bodies.find((b) => b.activity.id === entry.id);
        if (body) pushIds.set(body.activity.user_id, entry.push_id);
      }
    }
    rounds.push({ answeredAt, pushIds });
  };
  const t0 = Date.now();
  await sendRound(1);
  await sleep(t0 + BATCH_GAP_MS - Date.now());
  await sendRound(2);

  // The trickling delivery: how long it stays pending under a live send lease (being sent).
  let longestSendingMs = 0;
  const watchTrickle = async () => {
    const rows = await query<{ sending_ms: number | null }>(
      databaseUrl,
      `SELECT (EXTRACT(EPOCH FROM now() - l.taken_at) * 1000)::float8 AS sending_ms
         FROM messages m CROSS JOIN LATERAL push_deliveries(ARRAY[m.id], ARRAY[m.accepted_on]) x
         JOIN send_leases l ON l.push_ids @> ARRAY[m.id] AND l.provider = x.provider AND l.lease_until > now()
        WHERE m.user_id = 'hostile-trickle' AND m.open AND x.status = 'pending'`,
    );
    for (const row of rows) if (row.sending_ms) longestSendingMs = Math.max(longestSendingMs, row.sending_ms);
  };
  const trickleWatcher = setInterval(() => void watchTrickle().catch(() => undefined), 500);

  const normal = players.filter((userId) => userId.startsWith('player-'));
  const late = (round: (typeof rounds)[number]) =>
    normal.filter((userId) => {
      const pushId = round.pushIds.get(userId);
      return !providers.webpush.received.some((message) => message.id === userId && (message.payload as { push_id?: string })?.push_id === pushId && message.at <= round.answeredAt + DELIVERY_WINDOW_MS);
    });
  await until(async () => late(rounds[1]).length === 0 && late(rounds[0]).length === 0, rounds[1].answeredAt + DELIVERY_WINDOW_MS - Date.now());
  // The credit gets its 60 s too.
  await sleep(Math.max(0, creditSentAt + 60_000 - Date.now()));
  clearInterval(trickleWatcher);
  clearInterval(sampler);
  await watchTrickle();

  const [creditRow] = await query<{ status: string; error: string | null }>(databaseUrl, `SELECT status::text AS status, error FROM credits WHERE id = $1`, [credit.creditId ?? '00000000-0000-0000-0000-000000000000']);
  const errorLines = readFileSync(join(dir, 'logs', 'push-worker-webpush.log'), 'utf8')
    .split('\n')
    .filter((line) => /"level":50/.test(line) && /credential/i.test(line));
  const stored = await query<{ error: string }>(databaseUrl, `SELECT DISTINCT x.error FROM messages m CROSS JOIN LATERAL push_deliveries(ARRAY[m.id], ARRAY[m.accepted_on]) x WHERE x.error IS NOT NULL`);
  const running = apps.filter((app) => app.pid !== undefined && rssMb(app.pid) > 0).map((app) => app.name);
  const health = await fetch(`${base}/health/ready`).then((r) => r.status).catch(() => 0);
  const receipts = providers.receipts();

  const checks: Check[] = [
    {
      name: 'every player’s subscription on a listed origin is registered; outside the list is refused with 400',
      ok: refusedRegistrations.length === 0 && outsideAnswers.every(([, status]) => status === 400),
      lines: [...refusedRegistrations, ...outsideAnswers.map(([origin, status]) => `${origin}: ${status}`)],
    },
    {
      name: `every normal player gets both pushes within ${DELIVERY_WINDOW_MS / 1000} s of its batch’s answer`,
      ok: rounds.every((round) => late(round).length === 0),
      lines: rounds.map((round, i) => `batch ${i + 1}: ${normal.length - late(round).length} of ${normal.length} in time${late(round).length ? ` (late: ${late(round).slice(0, 5).join(', ')})` : ''}`),
    },
    {
      name: 'nothing ever connects to the internal address',
      ok: internal.connections() === 0 && internalHttp.connections() === 0,
      lines: [`https ${internal.connections()} connections, http ${internalHttp.connections()}`],
    },
    {
      name: `the Web Push worker stays below ${RSS_LIMIT_MB} MiB RSS`,
      ok: (peakRss.get('push-worker-webpush') ?? 0) > 0 && (peakRss.get('push-worker-webpush') ?? Infinity) < RSS_LIMIT_MB,
      lines: [`highest RSS sampled: ${(peakRss.get('push-worker-webpush') ?? 0).toFixed(0)} MiB`],
    },
    {
      name: `the trickling delivery leaves sending within PUSH_SEND_TIMEOUT_MS + 15 s`,
      ok: longestSendingMs < SEND_TIMEOUT_MS + 15_000 && hostile.get('trickle')!.requests() > 0,
      lines: [`longest seen sending: ${(longestSendingMs / 1000).toFixed(1)} s; ${hostile.get('trickle')!.requests()} requests to it`],
    },
    {
      name: 'no error-level line says the provider refused the operator’s credentials',
      ok: errorLines.length === 0,
      lines: errorLines.length ? errorLines.slice(0, 3).map((line) => line.slice(0, 300)) : ['none'],
    },
    {
      name: 'what the hostile endpoints answered is stored as a status and a short reason, never raw text',
      ok: stored.every((row) => !/maintenance|<html|xxxxxxxx|instance credentials/i.test(row.error) && row.error.length <= 200),
      lines: stored.map((row) => row.error).slice(0, 12),
    },
    {
      name: 'a funds credit whose platform answers 301 is not completed within 60 s, and the redirect’s target receives nothing',
      ok: !!creditRow && creditRow.status !== 'completed' && internalHttp.requests() === 0,
      lines: [`credit ${creditRow?.status ?? 'missing'}: ${creditRow?.error ?? ''}`],
    },
    {
      name: 'every app still runs at the end',
      ok: crashes.length === 0 && running.length === APPS.length && health === 200,
      lines: [`running: ${running.join(', ')}; gateway ready: ${health}`, ...crashes.map((c) => `${c.app} ${c.how}: ${c.tail.split('\n').slice(-2).join(' | ').slice(0, 300)}`)],
    },
  ];
  if (proxy) {
    const targets = proxy.targets().sort();
    const wanted = [
      'fcm.googleapis.com:443',
      'oauth2.googleapis.com:443',
      'api.sandbox.push.apple.com:443',
      'oauth-login.cloud.huawei.com:443',
      'push-api.cloud.huawei.com:443',
      'api.onesignal.com:443',
      'push.example.test:443',
      'crm.example.test:80',
    ];
    const native = receipts.filter((r) => Object.values(nativeTokens).includes(r.device));
    // The CRM and the wallet are http://: forwarded in absolute form, since the proxy tunnels to 443 only.
    const forwarded = [...new Set(proxy.connections.filter((c) => c.method === 'FORWARD').map((c) => c.target))].sort();
    checks.push({
      name: 'every provider’s sends and the CRM’s webhook pass through the proxy (http:// in absolute form), and nothing goes around it',
      ok: wanted.every((target) => targets.includes(target)) && forwarded.includes('crm.example.test:80') && proxy.refused.length === 0 && native.length >= 8 && crm.accepted.length > 0,
      lines: [
        `proxy targets: ${targets.join(', ')}`,
        `forwarded in absolute form: ${forwarded.join(', ')}; refused by the proxy: ${proxy.refused.length}`,
        `FCM, APNs, HMS and OneSignal sends received: ${native.length}; webhook posts accepted: ${crm.accepted.length}`,
      ],
    });
  }
  const stops = await Promise.all(apps.map(async (app) => [app.name, await app.stop(30000)] as const));
  checks.push({ name: 'every app stops on SIGTERM afterwards', ok: stops.every(([, how]) => how === 'exit 0'), lines: [stops.map(([name, how]) => `${name} ${how}`).join(', ')] });

  console.log(`\n=== hostile endpoints report${viaProxy ? ' (through a proxy)' : ''} ===`);
  console.log(`hostile origins: ${[...hostile.entries()].map(([name, s]) => `${name} ${s.requests()} requests`).join(', ')}`);
  console.log(`peak RSS: ${[...peakRss].map(([name, mb]) => `${name} ${mb.toFixed(0)} MiB`).join(', ')}`);
  console.log(`timing: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return printChecks(checks, 'chaos') ? 1 : 0;
}

main()
  .then((code) => exit(code))
  .catch((error) => {
    console.error('chaos: the hostile run could not complete:', error);
    console.log('\nchaos: 0 passed, 1 failed');
    return exit(1);
  });
