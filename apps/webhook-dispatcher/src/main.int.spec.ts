import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freePort, TcpProxy, until } from '@operator/testing';

// The dispatcher as it runs in production, a process of its own: its operations port answers
// /metrics, /health/live and /health/ready, readiness follows PostgreSQL, a taken METRICS_PORT
// stops it with one line, SIGTERM ends it cleanly, and its log names the CRM's URLs by origin only.

const ROOT = path.join(__dirname, '../../..');
const BUNDLE = path.join(ROOT, 'dist/apps/webhook-dispatcher/main.js');

interface Running {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | string | null>;
}

describe('webhook dispatcher operations port', () => {
  let proxy: TcpProxy;
  let port: number;
  let app: Running;

  function start(metricsPort: number, settings: Record<string, string> = {}): Running {
    const child = spawn(process.execPath, [BUNDLE], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        DATABASE_URL: proxy.urlFor(process.env.DATABASE_URL!),
        METRICS_PORT: String(metricsPort),
        // No CRM: it claims no event of the shared test database, and purges nothing.
        CRM_STATUS_WEBHOOK_URL: '',
        CRM_EVENTS_BASE_URL: '',
        RETENTION_DAYS: '0',
        ...settings,
      },
    });
    let [stdout, stderr] = ['', ''];
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
    return { child, stdout: () => stdout, stderr: () => stderr, exited };
  }

  const get = async (url: string) => {
    const response = await fetch(`http://127.0.0.1:${port}${url}`);
    return { status: response.status, text: await response.text() };
  };

  beforeAll(async () => {
    execFileSync(process.execPath, ['tools/build.mjs', 'webhook-dispatcher'], { cwd: ROOT, stdio: 'ignore' });
    proxy = await TcpProxy.forUrl(process.env.DATABASE_URL!).start();
    port = await freePort();
    app = start(port);
    await until(async () => (await get('/health/live').catch(() => undefined))?.status === 200, 'the operations port', 15000);
  });
  afterAll(async () => {
    app.child.kill('SIGKILL');
    await proxy.resume();
    await proxy.stop();
  });
  afterEach(() => proxy.resume());

  it('is live and ready, and serves every family with samples of the outbox and the dead letters', async () => {
    expect(await get('/health/live')).toEqual({ status: 200, text: '{"status":"ok"}' });
    const ready = await get('/health/ready');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.text)).toEqual({ status: 'ready', postgres: 'up' });

    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    for (const family of ['operator_dispatch_total', 'operator_messages_accepted_total', 'operator_queue_jobs', 'operator_credits', 'process_cpu_seconds_total']) {
      expect(metrics.text).toMatch(new RegExp(`^# TYPE ${family} `, 'm'));
    }
    for (const topic of ['push.status', 'bonus', 'balance']) {
      expect(metrics.text).toMatch(new RegExp(`^operator_outbox_pending_events\\{topic="${topic.replace('.', '\\.')}"\\} \\d+$`, 'm'));
    }
    expect(metrics.text).toMatch(/^operator_dead_letters \d+$/m);
    // Credits are the bonus app's to read.
    expect(metrics.text).not.toMatch(/^operator_credits\{/m);
  });

  it('is not ready while PostgreSQL is unreachable, still answers /metrics, and is ready again once it is back', async () => {
    await proxy.stop();
    const ready = await get('/health/ready');
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.text)).toEqual({ error: 'not ready', postgres: 'down' });
    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^operator_dead_letters \d+$/m);

    await proxy.resume();
    await until(async () => (await get('/health/ready')).status === 200, 'readiness once PostgreSQL is back', 10000);
  });

  it('stops with one line naming METRICS_PORT when the port is taken', async () => {
    const second = start(port);
    expect(await second.exited).toBe(1);
    expect(second.stderr()).toBe(`METRICS_PORT ${port} is already in use: set METRICS_PORT to a free port (0 takes any)\n`);
  });

  it("logs the CRM's URLs by their origin, never with their credentials, path or query", async () => {
    // Nowhere to post (the .invalid domain never resolves), and nothing to post from this database.
    const second = start(0, {
      LOG_LEVEL: 'info',
      CRM_STATUS_WEBHOOK_URL: 'https://crm-user:hook-s3cret@crm.invalid:8443/hooks/push-status?token=query-s3cret',
      CRM_EVENTS_BASE_URL: 'https://events-user:base-s3cret@events.crm.invalid/tenant-s3cret',
    });
    try {
      await until(async () => second.stdout().includes('webhook dispatcher started'), 'the dispatcher to start', 15000);
      const started = second.stdout().split('\n').map((line) => (line ? JSON.parse(line) : {})).find((line) => line.msg === 'webhook dispatcher started');
      expect(started).toEqual(expect.objectContaining({ statusUrl: 'https://crm.invalid:8443', eventsBase: 'https://events.crm.invalid' }));
      expect(second.stdout()).not.toMatch(/s3cret|crm-user|events-user|hooks/);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });

  it('closes the port and exits 0 on SIGTERM', async () => {
    app.child.kill('SIGTERM');
    expect(await app.exited).toBe(0);
    await expect(get('/health/live')).rejects.toThrow();
  });
});
