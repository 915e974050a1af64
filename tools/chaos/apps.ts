// The apps as separate processes, as in production, under a small supervisor: kill -9 on demand
// and start again; an app that dies on its own is recorded (a failure) and started again too.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killGroup, sleep } from './util';

export interface Exit {
  app: string;
  at: number;
  /** Signal or exit code. */
  how: string;
  /** The last lines the app wrote before it ended. */
  tail: string;
}

export class App {
  private child: ChildProcess | null = null;
  private expectingExit = false;
  private readonly logFile: string;
  /** Exits the suite did not cause. */
  readonly crashes: Exit[] = [];
  starts = 0;
  /** The app's name, with its replica's number when it runs several times (gateway-2). */
  readonly id: string;

  constructor(
    readonly name: string,
    private readonly env: NodeJS.ProcessEnv,
    logDir: string,
    private readonly onCrash: (exit: Exit) => void,
    replica?: number,
  ) {
    this.id = replica === undefined ? name : `${name}-${replica}`;
    this.logFile = join(logDir, `${this.id}.log`);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): void {
    const log = openSync(this.logFile, 'a');
    const child = spawn(process.execPath, [`dist/apps/${this.name}/main.js`], { env: this.env, detached: true, stdio: ['ignore', log, log] });
    closeSync(log);
    this.child = child;
    this.expectingExit = false;
    this.starts += 1;
    child.on('exit', (code, signal) => {
      if (this.child !== child) return;
      this.child = null;
      if (this.expectingExit) return;
      const exit = { app: this.id, at: Date.now(), how: signal ?? `exit ${code}`, tail: this.tail(60) };
      this.crashes.push(exit);
      this.onCrash(exit);
    });
  }

  /** kill -9 now; started again after `restartAfterMs` (a supervisor's restart). Answers when it runs again. */
  async kill9(restartAfterMs: number): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    this.expectingExit = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    killGroup(child.pid);
    await exited;
    if (this.child === child) this.child = null;
    await sleep(restartAfterMs);
    this.start();
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Answers how it ended. */
  async stop(graceMs: number): Promise<string> {
    const child = this.child;
    if (!child?.pid) return 'not running';
    this.expectingExit = true;
    const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? `exit ${code}`)));
    killGroup(child.pid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child.pid!), graceMs);
    const how = await exited;
    clearTimeout(timer);
    this.child = null;
    return how;
  }

  /** Last resort, synchronous (process exit): no waiting. */
  killNow(): void {
    this.expectingExit = true;
    if (this.child?.pid) killGroup(this.child.pid);
  }

  tail(lines = 12): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }
}
