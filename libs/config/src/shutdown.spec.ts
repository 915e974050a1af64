import { spawn } from 'node:child_process';
import { buildSync } from 'esbuild';

// Each case runs the helper in a process of its own (it installs signal handlers and exits), built
// from the script below. SCENARIO picks what `close` and `abandon` do; every log line and every
// call is printed as one JSON line.
const CHILD = `
import { onShutdown } from './shutdown';

const scenario = process.env.SCENARIO!;
const say = (line: object) => process.stdout.write(JSON.stringify(line) + '\\n');
const sink = (level: string) => (details: { err?: Error }, message: string) => say({ level, message, err: details.err?.message });
const never = () => new Promise<void>(() => undefined);

onShutdown({
  log: { info: sink('info'), warn: sink('warn'), error: sink('error') },
  timeoutMs: Number(process.env.TIMEOUT_MS),
  close: async () => {
    say({ call: 'close' });
    if (scenario === 'graceful' || scenario === 'uncaught' || scenario === 'rejection') return;
    if (scenario === 'fails') throw new Error('close broke');
    await never();
  },
  abandon: scenario === 'no-abandon' ? undefined : async () => {
    say({ call: 'abandon' });
    if (scenario === 'abandon-hangs') await never();
  },
});
setInterval(() => undefined, 1000);
if (scenario === 'uncaught') setTimeout(() => { throw new Error('boom'); }, 10);
if (scenario === 'rejection') setTimeout(() => void Promise.reject(new Error('rejected')), 10);
say({ call: 'ready' });
`;

let script: string;
beforeAll(() => {
  const built = buildSync({
    stdin: { contents: CHILD, resolveDir: __dirname, sourcefile: 'shutdown-child.ts', loader: 'ts' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    write: false,
    logLevel: 'silent',
  });
  script = built.outputFiles[0].text;
});

interface Line {
  call?: string;
  level?: string;
  message?: string;
  err?: string;
}

interface Run {
  lines: Line[];
  code: number | null;
  /** Milliseconds from the first signal (or from ready, without one) to the exit. */
  elapsedMs: number;
}

/** Starts the child, sends `signals` once it is ready (the second when it logs its shutdown), and waits for its exit. */
function run(scenario: string, timeoutMs: number, signals: NodeJS.Signals[] = ['SIGTERM']): Promise<Run> {
  const child = spawn(process.execPath, ['-e', script], { env: { ...process.env, SCENARIO: scenario, TIMEOUT_MS: String(timeoutMs) } });
  const lines: Line[] = [];
  let started = Date.now();
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = JSON.parse(buffered.slice(0, newline)) as Line;
      buffered = buffered.slice(newline + 1);
      lines.push(line);
      if (line.call === 'ready') {
        started = Date.now();
        if (signals[0]) child.kill(signals[0]);
      } else if (line.message?.startsWith('shutting down') && signals[1]) {
        child.kill(signals[1]);
      }
    }
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve({ lines, code, elapsedMs: Date.now() - started })));
}

const calls = (run: Run) => run.lines.filter((line) => line.call).map((line) => line.call);
const messages = (run: Run) => run.lines.filter((line) => line.message).map((line) => line.message);

describe('onShutdown', () => {
  it('closes gracefully on SIGTERM and exits 0, without abandoning anything', async () => {
    const result = await run('graceful', 2000);
    expect(result.code).toBe(0);
    expect(calls(result)).toEqual(['ready', 'close']);
    expect(messages(result)).toEqual(['shutting down: finishing the work in flight', 'stopped']);
  });

  it('abandons and exits 1 within the deadline when close never finishes', async () => {
    const result = await run('hang', 1000);
    expect(result.code).toBe(1);
    expect(calls(result)).toEqual(['ready', 'close', 'abandon']);
    expect(messages(result)).toContain('shutdown: the work in flight did not finish in time');
    // close gets the deadline less a fifth; abandon runs, then the process ends before the deadline.
    expect(result.elapsedMs).toBeGreaterThanOrEqual(750);
    expect(result.elapsedMs).toBeLessThan(1000 + 300);
  });

  it('exits 1 within the deadline when there is nothing to abandon', async () => {
    const result = await run('no-abandon', 500);
    expect(result.code).toBe(1);
    expect(calls(result)).toEqual(['ready', 'close']);
    expect(result.elapsedMs).toBeLessThan(500 + 300);
  });

  it('exits 1 at the deadline when abandon hangs too', async () => {
    const result = await run('abandon-hangs', 600);
    expect(result.code).toBe(1);
    expect(calls(result)).toEqual(['ready', 'close', 'abandon']);
    expect(messages(result)).toContain('shutdown: deadline passed, exiting');
    expect(result.elapsedMs).toBeGreaterThanOrEqual(580);
    expect(result.elapsedMs).toBeLessThan(600 + 300);
  });

  it('abandons and exits 1 when close fails', async () => {
    const result = await run('fails', 2000);
    expect(result.code).toBe(1);
    expect(calls(result)).toEqual(['ready', 'close', 'abandon']);
    expect(result.lines).toContainEqual(expect.objectContaining({ message: 'shutdown: close failed', err: 'close broke' }));
  });

  it('exits at once on a second signal', async () => {
    const result = await run('hang', 10000, ['SIGTERM', 'SIGINT']);
    expect(result.code).toBe(1);
    expect(messages(result)).toContain('shutdown: second signal, exiting now');
    expect(calls(result)).not.toContain('abandon');
    expect(result.elapsedMs).toBeLessThan(1000);
  });

  it.each([
    ['an uncaught exception', 'uncaught', 'boom'],
    ['an unhandled rejection', 'rejection', 'rejected'],
  ])('logs %s, closes and exits 1', async (_what, scenario, message) => {
    const result = await run(scenario, 2000, []);
    expect(result.code).toBe(1);
    expect(result.lines).toContainEqual(expect.objectContaining({ level: 'error', message: 'uncaught error: shutting down', err: message }));
    expect(calls(result)).toEqual(['ready', 'close']);
  });
});
