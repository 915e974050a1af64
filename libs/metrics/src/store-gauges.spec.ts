import { metricsText } from './catalog';
import type { OutboxTopicBacklog } from '@operator/db';
import { watchStores } from './store-gauges';

async function sample(line: string): Promise<number | undefined> {
  const found = (await metricsText()).split('\n').find((candidate) => candidate.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

function recordingLog() {
  const lines: { level: string; message: string }[] = [];
  const at = (level: string) => (_details: object, message: string) => lines.push({ level, message });
  return { lines, sink: { info: at('info'), warn: at('warn'), error: at('error') } };
}

describe('store gauges', () => {
  it('sets each gauge from its reading, and reads again only once the readings are older than maxAgeMs', async () => {
    let reads = 0;
    const stores = watchStores(
      {
        queueJobs: async () => {
          reads++;
          return [{ queue: 'push-fcm', waiting: 7, active: 2, delayed: 1, failed: 0 }];
        },
        credits: async () => [
          { state: 'accepted', brand: '0', count: 3 },
          { state: 'completed', brand: '0', count: 10 },
          { state: 'completed', brand: '7', count: 2 },
        ],
        deadLetters: async () => 4,
      },
      { log: recordingLog().sink, maxAgeMs: 100 },
    );
    await stores.refresh();
    await Promise.all([stores.refresh(), stores.refresh()]);
    expect(reads).toBe(1);
    expect(await sample('operator_queue_jobs{queue="push-fcm",state="waiting"}')).toBe(7);
    expect(await sample('operator_queue_jobs{queue="push-fcm",state="active"}')).toBe(2);
    expect(await sample('operator_queue_jobs{queue="push-fcm",state="failed"}')).toBe(0);
    expect(await sample('operator_credits{state="completed",brand="0"}')).toBe(10);
    expect(await sample('operator_credits{state="completed",brand="7"}')).toBe(2);
    expect(await sample('operator_dead_letters')).toBe(4);

    await new Promise((resolve) => setTimeout(resolve, 120));
    await stores.refresh();
    expect(reads).toBe(2);
  });

  it('keeps the last values through an outage, counts each failed reading and logs once per outage', async () => {
    let backlog: OutboxTopicBacklog[] | Error = [{ topic: 'bonus', pending: 12, oldestSeconds: 30 }];
    const log = recordingLog();
    const stores = watchStores({ outbox: async () => (backlog instanceof Error ? Promise.reject(backlog) : backlog) }, { log: log.sink, maxAgeMs: 0 });
    const failures = () => sample('operator_metrics_store_read_failures_total{reading="outbox"}');

    await stores.refresh();
    const failedBefore = (await failures()) ?? 0;
    backlog = new Error('connect ECONNREFUSED');
    await stores.refresh();
    await stores.refresh();
    expect(await sample('operator_outbox_pending_events{topic="bonus"}')).toBe(12);
    expect(await sample('operator_outbox_oldest_pending_seconds{topic="bonus"}')).toBe(30);
    expect((await failures())! - failedBefore).toBe(2);
    expect(log.lines.filter((line) => line.level === 'warn')).toHaveLength(1);

    backlog = [{ topic: 'bonus', pending: 0, oldestSeconds: 0 }];
    await stores.refresh();
    expect(await sample('operator_outbox_pending_events{topic="bonus"}')).toBe(0);
    expect(log.lines.map((line) => line.level)).toEqual(['warn', 'info']);
  });

  it('answers within timeoutMs while a store hangs, and does not pile up readings of it', async () => {
    let started = 0;
    let finish: (() => void) | undefined;
    const stores = watchStores(
      {
        deadLetters: () => {
          started++;
          return new Promise<number>((resolve) => (finish = () => resolve(9)));
        },
      },
      { log: recordingLog().sink, maxAgeMs: 0, timeoutMs: 50 },
    );
    const at = Date.now();
    await stores.refresh();
    await stores.refresh();
    expect(Date.now() - at).toBeLessThan(1000);
    expect(started).toBe(1);

    finish!();
    await new Promise((resolve) => setImmediate(resolve));
    await stores.refresh();
    expect(started).toBe(2);
  });
});
