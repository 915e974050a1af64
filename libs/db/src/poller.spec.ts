import { createPoller } from './poller';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function recordingLog() {
  const lines: { level: string; message: string }[] = [];
  const at = (level: string) => (_details: object, message: string) => void lines.push({ level, message });
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
}

describe('createPoller', () => {
  it('runs again at once while there is more, and pauses when idle', async () => {
    const { log } = recordingLog();
    const rounds: number[] = [];
    let left = 5;
    const poller = createPoller({ what: 'test', log, idleMs: 200, round: async () => (rounds.push(Date.now()), --left > 0) });
    poller.start();
    await sleep(100);
    await poller.stop();
    expect(rounds).toHaveLength(5); // four full rounds back to back, then the idle one waits
  });

  it('backs off while PostgreSQL is unreachable, logging the outage once, and says when it is back', async () => {
    const { lines, log } = recordingLog();
    let calls = 0;
    let backAt = 0;
    const started = Date.now();
    const poller = createPoller({
      what: 'test',
      log,
      idleMs: 10,
      maxBackoffMs: 80,
      round: async () => {
        calls += 1;
        if (calls === 7) backAt = Date.now();
        if (calls <= 6) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        return false;
      },
    });
    poller.start();
    await sleep(600);
    await poller.stop();
    expect(calls).toBeGreaterThan(6);
    // Six failures with pauses growing from 10 ms to 80 ms (jittered over their upper half) take at
    // least 5 + 10 + 20 + 40 + 40 + 40 ms; without the backoff they would take about 60 ms.
    expect(backAt - started).toBeGreaterThanOrEqual(150);
    expect(lines.filter((l) => l.level === 'warn')).toEqual([{ level: 'warn', message: 'test rounds wait for PostgreSQL' }]);
    expect(lines.filter((l) => l.level === 'info')).toEqual([{ level: 'info', message: 'test rounds running again' }]);
    expect(lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('logs every failure that is not an outage as an error, and keeps going', async () => {
    const { lines, log } = recordingLog();
    let calls = 0;
    const poller = createPoller({
      what: 'test',
      log,
      idleMs: 10,
      round: async () => {
        calls += 1;
        if (calls <= 2) throw new Error('a bug');
        return false;
      },
    });
    poller.start();
    await sleep(150);
    await poller.stop();
    expect(lines.filter((l) => l.level === 'error').map((l) => l.message)).toEqual(['test round failed', 'test round failed']);
    expect(calls).toBeGreaterThan(2);
  });
});
