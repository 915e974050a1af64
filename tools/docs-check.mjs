// `npm run docs:check`: the /docs page in a real browser. Starts the built gateway as production
// runs it and checks in headless Chromium (or CHROMIUM=path) that swagger-ui rendered every
// operation, that the queue dashboard opens on the operations port with an admin key, and that PORT
// answers 404 for both. Exits 1 when something falls short, 2 when Chromium is missing.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const SCREENSHOT = resolve('dist/docs-check/docs.png');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'];

function fail(message, code = 1) {
  console.error(`docs:check failed: ${message}`);
  process.exitCode = code;
}

function findChromium() {
  const candidates = process.env.CHROMIUM ? [process.env.CHROMIUM] : ['chromium', 'chromium-browser', 'google-chrome'];
  return candidates.find((command) => spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0);
}

function freePort() {
  return new Promise((done, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

async function waitFor(url, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await fetch(url).then((response) => response.ok, () => false);
    if (ok) return true;
    await sleep(200);
  }
  return false;
}

/** Runs headless Chromium on `url` with `args` (--dump-dom, --screenshot=...), in a profile of its own. */
function chromium(command, url, args) {
  const profile = mkdtempSync(join(tmpdir(), 'docs-check-'));
  try {
    return execFileSync(
      command,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${profile}`,
        '--window-size=1280,3000',
        // Virtual time runs until the page is idle (swagger-ui fetches the document, then renders).
        '--virtual-time-budget=20000',
        ...args,
        url,
      ],
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 },
    );
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** Problems of the operations pages on the API's port `base`: none when each answers 404 there. */
async function publicPortProblems(base) {
  const answers = await Promise.all(['/docs', '/openapi.json', '/metrics', '/admin/queues'].map(async (path) => ({ path, status: (await fetch(`${base}${path}`)).status })));
  return answers.filter(({ status }) => status !== 404).map(({ path, status }) => `${base}${path} answered ${status} on PORT, not 404`);
}

/** Problems of the queue dashboard served at `base` with `key` as the Basic password: none when it opens with its assets. */
async function dashboardProblems(base, key) {
  const authorization = `Basic ${Buffer.from(`ops:${key}`).toString('base64')}`;
  const refused = await fetch(`${base}/admin/queues`);
  if (refused.status !== 401) return [`/admin/queues answered ${refused.status} without credentials, not 401`];
  const page = await fetch(`${base}/admin/queues`, { headers: { authorization } });
  if (page.status !== 200) return [`/admin/queues answered ${page.status} with Basic credentials, not 200`];
  const assets = [...(await page.text()).matchAll(/(?:src|href)="(static\/[^"]+)"/g)].map((match) => `${base}/admin/queues/${match[1]}`);
  if (!assets.length) return ['/admin/queues links no static asset'];
  const statuses = await Promise.all(assets.map(async (url) => ({ url, status: (await fetch(url, { headers: { authorization } })).status })));
  return statuses.filter(({ status }) => status !== 200).map(({ url, status }) => `${url} answered ${status}, not 200`);
}

/** The operations swagger-ui rendered: "POST /channels/push/single", from each operation block's method and path. */
function renderedOperations(dom) {
  const found = new Set();
  for (const block of dom.split('class="opblock-summary-method"').slice(1)) {
    const method = />([A-Z]+)</.exec(block)?.[1];
    const path = /data-path="([^"]+)"/.exec(block)?.[1];
    if (method && path) found.add(`${method} ${path.replace(/&amp;/g, '&').replace(/\u200b/g, '')}`);
  }
  return found;
}

const command = findChromium();
if (!command) {
  fail('Chromium is not installed. On Debian or Ubuntu: apt-get install -y chromium (or set CHROMIUM to a Chrome or Chromium binary).', 2);
} else {
  execFileSync(process.execPath, ['tools/build.mjs', 'gateway'], { stdio: 'inherit' });
  const port = await freePort();
  let operationsPort = await freePort();
  while (operationsPort === port) operationsPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const operations = `http://127.0.0.1:${operationsPort}`;
  const secret = () => randomBytes(32).toString('base64');
  const adminKey = secret();
  const gateway = spawn(process.execPath, ['dist/apps/gateway/main.js'], {
    env: {
      ...process.env,
      NODE_ENV: 'production',
      OPERATOR_API_KEYS: secret(),
      INTERNAL_API_KEYS: '',
      INTERNAL_DEVICE_KEYS: secret(),
      INTERNAL_ADMIN_KEYS: adminKey,
      TRACKING_SECRET: secret(),
      ADMIN_UI: 'true',
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: String(operationsPort),
      LOG_LEVEL: 'warn',
      QUEUE_PREFIX: `docs-check-${process.pid}`,
      MAX_EVENT_LOOP_DELAY_MS: '0',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise((done) => gateway.once('exit', done));
  try {
    if (!(await waitFor(`${base}/health/live`, 20000))) {
      fail(`the gateway did not answer at ${base}/health/live within 20 s (is it failing to start? see its output above)`);
    } else {
      const document = await (await fetch(`${operations}/openapi.json`)).json();
      const expected = Object.entries(document.paths).flatMap(([path, operations]) =>
        Object.keys(operations)
          .filter((method) => METHODS.includes(method))
          .map((method) => `${method.toUpperCase()} ${path}`),
      );
      const dom = chromium(command, `${operations}/docs`, ['--dump-dom']);
      const rendered = renderedOperations(dom);
      const missing = expected.filter((operation) => !rendered.has(operation));
      mkdirSync(resolve('dist/docs-check'), { recursive: true });
      chromium(command, `${operations}/docs`, [`--screenshot=${SCREENSHOT}`]);
      console.log(`screenshot: ${SCREENSHOT}`);
      if (!dom.includes('swagger-ui')) fail('/docs did not render swagger-ui (the page is not the documentation page)');
      else if (missing.length) fail(`/docs rendered ${rendered.size} of ${expected.length} operations; missing:\n  ${missing.join('\n  ')}`);
      else console.log(`ok: /docs rendered all ${expected.length} operations of openapi.json (${document.info.title} ${document.info.version})`);
      const dashboard = await dashboardProblems(operations, adminKey);
      if (dashboard.length) fail(`the queue dashboard:\n  ${dashboard.join('\n  ')}`);
      else console.log('ok: /admin/queues opens on METRICS_PORT with Basic auth and an admin key, its assets too');
      const exposed = await publicPortProblems(base);
      if (exposed.length) fail(`the public port:\n  ${exposed.join('\n  ')}`);
      else console.log('ok: PORT answers 404 for /docs, /openapi.json, /metrics and /admin/queues');
    }
  } finally {
    gateway.kill('SIGTERM');
    await exited;
  }
}
