import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// What the PgBouncer and PostgreSQL helpers share: the binaries, and the user they run as. Neither
// PostgreSQL nor PgBouncer runs as root, so as root (CI's containers) they run as `postgres`.

/** POSTGRES_BIN, else the newest PostgreSQL of Debian's layout (/usr/lib/postgresql/<major>/bin). */
export const POSTGRES_BIN = process.env.POSTGRES_BIN ?? newestPostgresBin();
/** Where Debian's pgbouncer package puts it (.ci/run installs it). */
export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

function newestPostgresBin(): string {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((name) => /^\d+$/.test(name)).map(Number) : [];
  return join(root, String(majors.length ? Math.max(...majors) : 15), 'bin');
}

interface RunAs {
  uid: number;
  gid: number;
}

let runAs: RunAs | undefined | null;

/** The user the servers run as: `postgres` when this process is root, else this process's own. */
export function serverUser(): RunAs | undefined {
  if (runAs !== undefined) return runAs ?? undefined;
  if (process.getuid?.() !== 0) {
    runAs = null;
    return undefined;
  }
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  runAs = { uid: id('-u'), gid: id('-g') };
  return runAs;
}

/** A fresh directory under the system's temp folder, owned by the user the servers run as. */
export function serverDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const user = serverUser();
  if (user) chownSync(dir, user.uid, user.gid);
  chmodSync(dir, 0o700);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** Runs a program as the server user to its end; rejects with its output when it fails. */
export function runAsServer(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { ...serverUser(), cwd: tmpdir(), encoding: 'utf8', timeout: 60000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed: ${stderr || stdout || error.message}`));
      else resolve(stdout);
    });
  });
}

/** Starts a long-running program as the server user; its output is kept for the error of a failed start. */
export function spawnAsServer(file: string, args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(file, args, { ...serverUser(), cwd: tmpdir(), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, output: () => output };
}

/**
 * Runs SQL with psql (simple query protocol, what PgBouncer's admin console takes) on a connection
 * of its own, and answers the rows, one line each, columns split by `|`. Rejects with psql's error.
 */
export function psql(url: string, sql: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(
      join(POSTGRES_BIN, 'psql'),
      [url, '--no-psqlrc', '--tuples-only', '--no-align', '--set', 'ON_ERROR_STOP=1', '--command', sql],
      { encoding: 'utf8', timeout: 10000, env: { ...process.env, PGCONNECT_TIMEOUT: '2' } },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`psql: ${stderr.trim() || error.message}`));
        else resolve(stdout.split('\n').filter(Boolean));
      },
    );
  });
}
