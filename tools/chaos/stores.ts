// The suite's own stores: a database recreated at each run, and a redis-server of its own (append-only,
// fsync every second) that can be killed, lose the tail of its log, and come back.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, statSync, truncateSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { killGroup, sleep } from './util';

export function freshDatabase(url: string): void {
  const script = [
    "import { ensureDatabase, migrate } from './tools/db-migrate.mjs';",
    "import { seed } from './tools/seed.mjs';",
    'const url = process.env.CHAOS_DATABASE_URL;',
    'await ensureDatabase(url, { recreate: true });',
    'migrate(url);',
    'await seed(url);',
  ].join('\n');
  execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, CHAOS_DATABASE_URL: url },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

export async function query<T extends pg.QueryResultRow = any>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (data) => done(data.toString().startsWith('+PONG')));
    socket.on('connect', () => socket.write('PING\r\n'));
  });
}

export interface AofLoss {
  at: number;
  file: string;
  bytesBefore: number;
  bytesAfter: number;
}

/**
 * A redis-server on its own port and directory, as production runs it (appendonly, everysec,
 * noeviction). AOF rewrites are off so that the tail of one incr file is the newest writes.
 */
export class ChaosRedis {
  private child: ChildProcess | null = null;
  private readonly sizes: { at: number; size: number; file: string }[] = [];
  private sampler: NodeJS.Timeout | null = null;

  constructor(
    readonly port: number,
    private readonly dir: string,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    const log = openSync(join(this.dir, 'redis.log'), 'a');
    this.child = spawn(
      'redis-server',
      [
        '--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '',
        '--appendonly', 'yes', '--appendfsync', 'everysec', '--aof-load-truncated', 'yes',
        '--auto-aof-rewrite-percentage', '0', '--maxmemory-policy', 'noeviction', '--protected-mode', 'no',
      ],
      { detached: true, stdio: ['ignore', log, log] },
    );
    const deadline = Date.now() + 15000;
    while (!(await ping(this.port))) {
      if (Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not answer; see ${join(this.dir, 'redis.log')}`);
      await sleep(50);
    }
    this.sampler ??= setInterval(() => this.sample(), 100);
  }

  /** The AOF file that takes the newest writes (the last incr file of the manifest). */
  private incrFile(): string | undefined {
    const manifest = join(this.dir, 'appendonlydir', 'appendonly.aof.manifest');
    if (!existsSync(manifest)) return undefined;
    const incr = readFileSync(manifest, 'utf8')
      .split('\n')
      .map((line) => /^file (\S+) seq \d+ type i/.exec(line)?.[1])
      .filter((name): name is string => !!name);
    return incr.length ? join(this.dir, 'appendonlydir', incr[incr.length - 1]) : undefined;
  }

  private sample(): void {
    const file = this.incrFile();
    if (!file || !this.child) return;
    try {
      this.sizes.push({ at: Date.now(), size: statSync(file).size, file });
    } catch {
      return;
    }
    while (this.sizes.length > 100) this.sizes.shift();
  }

  /**
   * kill -9, then the AOF loses what was written in the last `lossMs` (what appendfsync everysec
   * risks on a machine that goes down), then redis-server starts again on the same files.
   */
  async crashAndRestart(lossMs: number, downMs: number): Promise<AofLoss | undefined> {
    const at = Date.now();
    if (this.child?.pid) killGroup(this.child.pid);
    this.child = null;
    await sleep(100);
    const file = this.incrFile();
    let loss: AofLoss | undefined;
    if (file) {
      const bytesBefore = statSync(file).size;
      const kept = [...this.sizes].reverse().find((s) => s.file === file && s.at <= at - lossMs);
      const bytesAfter = Math.min(bytesBefore, kept?.size ?? bytesBefore);
      truncateSync(file, bytesAfter);
      loss = { at, file, bytesBefore, bytesAfter };
    }
    this.sizes.length = 0;
    await sleep(downMs);
    await this.start();
    return loss;
  }

  stop(): void {
    if (this.sampler) clearInterval(this.sampler);
    this.sampler = null;
    if (this.child?.pid) killGroup(this.child.pid);
    this.child = null;
  }
}
