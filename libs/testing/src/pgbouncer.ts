import { chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './ports';
import { PGBOUNCER_BIN, psql, removeDir, serverDir, serverUser, spawnAsServer } from './postgres-processes';
import { until } from './until';

export interface PgBouncer {
  /** The target URL with its host and port replaced by the pooler's: same user, password and database. */
  readonly url: string;
  readonly port: number;
  /** Points the pooler at another server (`host:port`, a standby just promoted); returns once PgBouncer has reloaded. */
  reload(target: string): Promise<void>;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Extra `[pgbouncer]` settings; by default everything but what the test needs is PgBouncer's own default. */
  settings?: Record<string, string | number>;
}

/**
 * A PgBouncer of its own in front of `targetUrl`, as production runs it: transaction pooling and
 * PgBouncer's defaults (no `ignore_startup_parameters`), every database passed through, its admin
 * console open to the target's user.
 */
export async function startPgBouncer(targetUrl: string, { settings = {} }: PgBouncerOptions = {}): Promise<PgBouncer> {
  const target = new URL(targetUrl);
  const user = decodeURIComponent(target.username) || 'postgres';
  const port = await freePort();
  const dir = serverDir('pgbouncer-');
  const ini = join(dir, 'pgbouncer.ini');

  const write = (host: string, serverPort: string) => {
    const lines = [
      '[databases]',
      `* = host=${host} port=${serverPort}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'pool_mode = transaction',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `admin_users = ${user}`,
      ...Object.entries(settings).map(([key, value]) => `${key} = ${value}`),
    ];
    writeFileSync(ini, `${lines.join('\n')}\n`);
    writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`);
    const owner = serverUser();
    if (owner) for (const file of [ini, join(dir, 'users.txt')]) chownSync(file, owner.uid, owner.gid);
  };
  write(target.hostname, target.port || '5432');

  const { child, output } = spawnAsServer(PGBOUNCER_BIN, [ini]);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let running = true;
  void exited.then(() => (running = false));

  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  const adminUrl = new URL(url);
  adminUrl.pathname = '/pgbouncer';

  /** One command on PgBouncer's admin console. */
  const admin = (command: string) => psql(adminUrl.toString(), command);

  try {
    await until(async () => {
      if (!running) throw new Error(`pgbouncer exited at start: ${output()}`);
      return admin('SHOW VERSION').then(
        () => true,
        () => false,
      );
    }, 'pgbouncer to listen', 10000);
  } catch (error) {
    child.kill('SIGKILL');
    removeDir(dir);
    throw error;
  }

  return {
    url: url.toString(),
    port,
    async reload(to) {
      const [host, serverPort] = to.split(':');
      write(host, serverPort || '5432');
      await admin('RELOAD');
    },
    async stop() {
      if (running) {
        child.kill('SIGTERM');
        await exited;
      }
      removeDir(dir);
    },
  };
}
