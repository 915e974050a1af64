import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { testTls } from '@operator/testing';

const ROOT = path.resolve(__dirname, '../../../..');

/**
 * A push worker app as it runs in production, a process of its own started from its bundle, for
 * the specs that kill it: it trusts the test CA, logs nothing, takes a free metrics port, and
 * lets a killed worker's claims lapse and its lost jobs be found again within seconds.
 */
export class BundledWorker {
  private readonly bundle: string;
  private readonly caFile: string;
  private readonly children: ChildProcess[] = [];

  /** Builds the app's bundle (in beforeAll: it takes a few seconds). */
  constructor(app: string) {
    const dir = mkdtempSync(path.join(tmpdir(), `${app}-`));
    this.caFile = path.join(dir, 'ca.pem');
    writeFileSync(this.caFile, testTls().ca);
    execFileSync(process.execPath, ['tools/build.mjs', app], { cwd: ROOT, stdio: 'ignore' });
    this.bundle = path.join(ROOT, `dist/apps/${app}/main.js`);
  }

  /** Starts one more worker process; `env` adds to (and overrides) the settings above. */
  start(env: Record<string, string>): ChildProcess {
    const child = spawn(process.execPath, [this.bundle], {
      cwd: ROOT,
      stdio: 'ignore',
      env: {
        ...process.env,
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        NODE_EXTRA_CA_CERTS: this.caFile,
        PUSH_CLAIM_LEASE_MS: '1500',
        PUSH_RECONCILE_INTERVAL_MS: '300',
        PUSH_RECONCILE_AFTER_MS: '1000',
        PUSH_RETRY_AFTER_MAX_MS: '1000',
        METRICS_PORT: '0',
        ...env,
      },
    });
    this.children.push(child);
    return child;
  }

  /** SIGKILL to every process started and still running. */
  killAll(): void {
    for (const child of this.children.splice(0)) child.kill('SIGKILL');
  }
}
