// The bench scripts' apps: each built app run as its own process, and the wait for what they do.
import { spawn, type ChildProcess } from 'node:child_process';
import type http from 'node:http';

/** Starts built apps (dist/apps/<name>/main.js) with `appEnv`, the given extra settings and node options (`--cpu-prof`). */
export function appStarter(appEnv: NodeJS.ProcessEnv): (name: string, extra: Record<string, string>, nodeArgs?: string[]) => ChildProcess {
  return (name, extra, nodeArgs = []) =>
    spawn(process.execPath, [...nodeArgs, `dist/apps/${name}/main.js`], { env: { ...appEnv, ...extra }, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** Stops an app with SIGTERM; resolves once it exited (at once if it already had). */
export function stopApp(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Waits until `probe` answers true, asking every `everyMs`; throws naming `what` past `ms`. */
export async function waitUntil(probe: () => Promise<boolean>, what: string, ms = 600_000, everyMs = 100): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A local server standing in for the CRM's status webhook, on a port of its own, keeping connections. */
export abstract class LocalReceiver {
  port = 0;
  protected abstract readonly server: http.Server;

  async start() {
    this.server.keepAliveTimeout = 60000;
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}
