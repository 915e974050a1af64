// `npm run bench -- --campaign N`: one campaign of N one-device FCM messages end to end (batches of
// 500 into the gateway, one FCM worker against the local fake FCM server, the dispatcher posting
// the statuses to a local receiver), until every accepted push's `sent` status arrived. It prints
// the time, each process's CPU per message, and its memory sampled every second over the run, so
// memory that grows with the campaign's size shows. Every piece is kept small whatever N is: the
// bodies are made as they are sent, and what was accepted and reported is one byte per message.
import type { ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import http from 'node:http';
import { Redis } from 'ioredis';
import type pg from 'pg';
import { fcmToken } from '@operator/testing';
import type { Providers } from '../chaos/providers';
import { each, type Request } from './load';
import { LocalReceiver, stopApp, waitUntil } from './processes';
import { cpuBetween, cpuPer, sampleCpu } from './cpu';
import { memoryLines, procKiB, storeMemory, type MemorySample } from './memory';

const env = process.env;
const BATCH = 500;
const BRAND = 7;
/** No new status for this long fails the run. */
const STALL_SECONDS = Number(env.BENCH_CAMPAIGN_STALL_SECONDS || 120);
/** Growth from 25% to 100% of the run under this many MiB (or a tenth of the size) is flat. */
const FLAT_MIB = Number(env.BENCH_FLAT_MIB || 32);

export interface CampaignDeps {
  gatewayPort: number;
  gatewayPid: number | undefined;
  players: number;
  pool: pg.Pool;
  redisUrl: string;
  providers: Providers;
  start: (name: string, extra: Record<string, string>) => ChildProcess;
  log: (line: string) => void;
}

/** The CRM's side: counts each message's `sent` statuses by the `n` of its meta, one byte a message. */
class CountingReceiver extends LocalReceiver {
  readonly sent: Uint8Array;
  /** Messages both accepted and reported `sent`. */
  reached = 0;
  duplicates = 0;
  /** Statuses that name no message of the campaign (no meta.n, or one not accepted yet is not counted here). */
  strays = 0;
  posts = 0;
  byStatus: Record<string, number> = {};
  lastAt = performance.now();
  protected readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      this.posts += 1;
      try {
        const parsed = JSON.parse(Buffer.concat(chunks).toString()) as Event | Event[];
        for (const event of Array.isArray(parsed) ? parsed : [parsed]) this.take(event);
      } catch {
        this.strays += 1;
      }
      res.end('{"message":"success"}');
    });
  });

  constructor(
    total: number,
    private readonly accepted: Uint8Array,
  ) {
    super();
    this.sent = new Uint8Array(total);
  }

  private take(event: Event) {
    const status = String(event.status);
    this.byStatus[status] = (this.byStatus[status] ?? 0) + 1;
    this.lastAt = performance.now();
    if (status !== 'sent') return;
    const n = event.meta?.n;
    if (typeof n !== 'number' || n < 0 || n >= this.sent.length) return void (this.strays += 1);
    if (this.sent[n] > 0) this.duplicates += 1;
    else if (this.accepted[n]) this.reached += 1;
    if (this.sent[n] < 255) this.sent[n] += 1;
  }

}

interface Event {
  status?: unknown;
  push_id?: string;
  meta?: { n?: unknown };
}

/** The campaign's batches, each body made when it is sent; message n carries `meta.n` and activity id `firstId + n`. */
function* batches(total: number, players: number, firstId: number): Generator<Request> {
  for (let from = 0; from < total; from += BATCH) {
    const messages = [];
    for (let n = from; n < Math.min(total, from + BATCH); n++) {
      messages.push({
        activity: { id: firstId + n, brand_id: BRAND, user_id: `campaign-player-${n % players}`, activity_id: 55, action_group_id: 2, trigger_hash: 'campaign', action_id: 3 },
        title: 'Weekend reload',
        body: 'Your 50 free spins are waiting',
        android: { priority: 'high', channel_id: 'promos' },
        meta: { campaign: 'bench', n },
      });
    }
    yield { path: '/channels/push/batch', headers: { 'x-api-key': 'dev-operator-key' }, body: JSON.stringify(messages) };
  }
}

const redisInfo = (info: string, field: string) => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);

/** Runs the campaign; answers the lines to print. */
export async function campaign(total: number, deps: CampaignDeps): Promise<string[]> {
  const { gatewayPort, players, log } = deps;
  const accepted = new Uint8Array(total);
  const receiver = await new CountingReceiver(total, accepted).start();
  const redis = new Redis(deps.redisUrl, { maxRetriesPerRequest: 3 });
  redis.on('error', (error) => log(`redis: ${error.message}`));
  const db = Number(new URL(deps.redisUrl).pathname.slice(1) || 0);

  await each(
    gatewayPort,
    16,
    Array.from({ length: players }, (_, i) => ({
      path: '/v1/devices',
      headers: { 'x-api-key': 'dev-internal-key' },
      body: JSON.stringify({ user_id: `campaign-player-${i}`, brand_id: BRAND, provider: 'fcm', platform: 'android', token: fcmToken() }),
    })),
  );
  log(`${players} FCM players registered; ${total} messages to them, ${Math.ceil(total / players)} each at most`);

  const dispatcher = deps.start('webhook-dispatcher', { CRM_STATUS_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/push-status` });
  const worker = deps.start('push-worker-fcm', deps.providers.workerEnv());
  const apps: Record<string, number | undefined> = { gateway: deps.gatewayPid, 'FCM worker': worker.pid, dispatcher: dispatcher.pid };
  try {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // PostgreSQL's processes: the server's own and this database's backends (other databases' are not this run's).
    const postgresPids = async () =>
      (await deps.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() OR datname IS NULL')).rows.map((row) => row.pid);
    let pgPids = await postgresPids();
    const samples: MemorySample[] = [];
    const keys: { at: number; keys: number }[] = [];
    let sampling = false;
    let fcmSends = 0;
    const sample = async () => {
      if (sampling) return;
      sampling = true;
      try {
        // The fake FCM server keeps every request it took: counted and forgotten each second, so the bench's own memory is its own.
        fcmSends += deps.providers.fcm.requests.length;
        deps.providers.fcm.requests.length = 0;
        deps.providers.fcm.tokenGrants.length = 0;
        pgPids = await postgresPids().catch(() => pgPids);
        const info = await redis.info().catch(() => '');
        const at = performance.now();
        const kib: Record<string, number> = {};
        for (const [name, pid] of Object.entries(apps)) kib[`${name} RSS`] = procKiB(pid, 'VmRSS');
        Object.assign(kib, storeMemory(pgPids));
        kib['Redis used_memory'] = redisInfo(info, 'used_memory') / 1024;
        kib['bench RSS'] = procKiB('self', 'VmRSS');
        kib['bench V8 heap used'] = process.memoryUsage().heapUsed / 1024;
        samples.push({ at, kib });
        keys.push({ at, keys: Number(new RegExp(`^db${db}:keys=(\\d+)`, 'm').exec(info)?.[1] ?? 0) });
      } finally {
        sampling = false;
      }
    };
    await sample();
    const timer = setInterval(() => void sample(), 1000);

    const firstId = randomInt(1, 2 ** 40);
    let failed = 0;
    let acceptedCount = 0;
    const cpu = sampleCpu(apps);
    const started = performance.now();
    try {
      await each(gatewayPort, 4, batches(total, players, firstId), (_status, body) => {
        const answer = JSON.parse(body) as { successful: { id: number }[]; failed: unknown[]; fatal: unknown[] };
        failed += answer.failed.length + answer.fatal.length;
        for (const { id } of answer.successful) {
          const n = id - firstId;
          accepted[n] = 1;
          acceptedCount += 1;
          if (receiver.sent[n] > 0) receiver.reached += 1;
        }
      });
      const acceptSeconds = (performance.now() - started) / 1000;
      log(`${acceptedCount} of ${total} accepted in ${acceptSeconds.toFixed(1)} s; ${receiver.reached} reported so far`);
      let lastLog = performance.now();
      await waitUntil(
        async () => {
          if (performance.now() - receiver.lastAt > STALL_SECONDS * 1000)
            throw new Error(`campaign stalled: no status for ${STALL_SECONDS} s, ${receiver.reached} of ${acceptedCount} accepted pushes reported sent`);
          if (performance.now() - lastLog > 30000) {
            lastLog = performance.now();
            log(`${receiver.reached} of ${acceptedCount} reported after ${((lastLog - started) / 1000).toFixed(0)} s`);
          }
          return receiver.reached >= acceptedCount;
        },
        'every status of the campaign',
        Number(env.BENCH_CAMPAIGN_TIMEOUT_SECONDS || 120 + total / 250) * 1000,
        200,
      );
      const seconds = (performance.now() - started) / 1000;
      const used = cpuBetween(cpu, sampleCpu(apps));
      clearInterval(timer);
      await sample();
      const peaks: Record<string, number> = { 'bench RSS': procKiB('self', 'VmHWM') };
      for (const [name, pid] of Object.entries(apps)) peaks[`${name} RSS`] = procKiB(pid, 'VmHWM');
      // Late duplicates: a second `sent` for a push would come within the dispatcher's next rounds.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      fcmSends += deps.providers.fcm.requests.length;
      const keyAt = (share: number) => keys.filter((k) => k.at <= keys[0].at + share * (keys[keys.length - 1].at - keys[0].at)).pop()?.keys ?? 0;
      return [
        `campaign: ${total} one-device FCM messages to ${players} players, batches of ${BATCH}, 4 in flight; one FCM worker (local fake FCM); ` +
          `dispatcher with ${env.CRM_STATUS_WEBHOOK_BATCH_MAX ? `CRM_STATUS_WEBHOOK_BATCH_MAX=${env.CRM_STATUS_WEBHOOK_BATCH_MAX}` : 'one status per POST'}`,
        `accepted: ${acceptedCount} (failed or fatal: ${failed}) in ${acceptSeconds.toFixed(1)} s (${(acceptedCount / acceptSeconds).toFixed(0)} messages/s)`,
        `reported: ${receiver.reached} accepted pushes sent; duplicate sent statuses: ${receiver.duplicates}; strays: ${receiver.strays}; ` +
          `statuses by kind: ${JSON.stringify(receiver.byStatus)} in ${receiver.posts} posts; sends the fake FCM server took: ${fcmSends}`,
        `total: ${seconds.toFixed(1)} s, ${(acceptedCount / seconds).toFixed(0)} messages/s (first request to last status)`,
        `CPU per message: ${cpuPer(used, acceptedCount, 'bench (load, fake FCM, receiver)')}`,
        ...memoryLines(samples, peaks, FLAT_MIB),
        `  keys in Redis db ${db}: ${[0.1, 0.5, 0.9, 1].map(keyAt).join(' / ')}`,
        'peaks: the apps\' and the bench\'s VmHWM; PostgreSQL and Redis: the highest sum sampled. Redis RSS and used_memory are the whole server\'s (shared).',
      ];
    } finally {
      clearInterval(timer);
    }
  } finally {
    await Promise.all([stopApp(worker), stopApp(dispatcher)]);
    receiver.close();
    redis.disconnect();
  }
}
