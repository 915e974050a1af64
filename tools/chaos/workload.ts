// What the CRM does in a run, shared by the fault suite and its HA run: devices, pushes and credits
// on a timeline with resends, the wait to settle, and the rows the verdicts read.
import type { FakeCrm, SeededRandom as Random } from '@operator/testing';
import { BRAND_ID, brandKey, CREDIT_BRANDS, INTERNAL_KEY, OPERATOR_KEY, Pool, type ChaosCredit, type ChaosMessage, type CrmDriver } from './crm';
import type { ChaosDevice, Providers } from './providers';
import type { Load } from './scale';
import type { Check, CreditRows } from './checks';
import { DELIVERIES_TO_SEND_SQL } from '../../libs/db/src/to-send';
import { query } from './stores';
import { since, sleep } from './util';
import type { ProviderName } from '@operator/contract';
import { PROVIDER_NAMES, PUSH_TUNING } from '@operator/provider-registry';

export const APPS = ['gateway', ...PROVIDER_NAMES.map((name) => `push-worker-${name}`), 'bonus', 'webhook-dispatcher'];
// The workers' defaults: a job's messages handed to the provider client at once, its connections
// deciding how many are on the wire. A player has at most one device per provider, so a killed
// worker had at most WORKER_CONCURRENCY x WORKER_PARALLEL_MESSAGES sends in flight.
export const WORKER_CONCURRENCY = 10;
export const WORKER_PARALLEL_MESSAGES = 100;
/** PUSH_RECORD_INTERVAL_MS of the workers: an answer waits this long at most before its write starts. */
export const RECORD_INTERVAL_MS = 100;
/** The interval and a write under way, on a loaded, shared machine. */
export const RECORD_WINDOW_MS = RECORD_INTERVAL_MS + 900;

/** Bound by the connections (one request each), else by the jobs' messages (HTTP/2 providers). */
export function sendsOnTheWire(provider: ProviderName): number {
  const all = WORKER_CONCURRENCY * WORKER_PARALLEL_MESSAGES;
  if (provider === 'webpush' || provider === 'hms') return Math.min(all, PUSH_TUNING[provider].providerConnections);
  return all;
}

/** Short polls, backoffs, leases and reconciliation, so that a run settles in minutes. */
export function appEnv(providers: Providers, crm: FakeCrm, queuePrefix: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    DATABASE_POOL_SIZE: '5',
    QUEUE_PREFIX: queuePrefix,
    // Apps started again, and several workers of one kind, each take a free metrics port.
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    CRM_STATUS_WEBHOOK_URL: crm.url('/push-status'),
    CRM_EVENTS_BASE_URL: crm.origin,
    WEBHOOK_POLL_MS: '100',
    WEBHOOK_BACKOFF_MS: '500',
    WEBHOOK_MAX_BACKOFF_MS: '5000',
    BONUS_POLL_MS: '100',
    BONUS_BACKOFF_MS: '1000',
    PUSH_WORKER_CONCURRENCY: String(WORKER_CONCURRENCY),
    PUSH_WORKER_PARALLEL_MESSAGES: String(WORKER_PARALLEL_MESSAGES),
    PUSH_CLAIM_LEASE_MS: '15000',
    PUSH_RECORD_INTERVAL_MS: String(RECORD_INTERVAL_MS),
    PUSH_SEND_BACKOFF_MS: '500',
    // Jobs Redis lost are found again within the run (production waits 5 minutes by default).
    PUSH_RECONCILE_INTERVAL_MS: '2000',
    PUSH_RECONCILE_AFTER_MS: '20000',
    // At most the reconciler's wait (the workers refuse more): a Retry-After of an hour waits 15 s here.
    PUSH_RETRY_AFTER_MAX_MS: '15000',
    OPERATOR_API_KEYS: [OPERATOR_KEY, ...CREDIT_BRANDS.map((brand) => `${brandKey(brand)}@${brand}`)].join(','),
    WEBHOOK_CONCURRENCY: '32',
    ...providers.workerEnv(),
  };
}

/** False after `ms`; a failed probe counts as false. */
export async function until(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return true;
    await sleep(200);
  }
  return false;
}

const DEVICE_LAYOUTS: ProviderName[][] = [
  ['fcm'],
  ['fcm'],
  ['fcm'],
  ['fcm'],
  ['apns'],
  ['apns'],
  ['webpush'],
  ['fcm', 'webpush'],
  ['fcm', 'webpush'],
  ['apns', 'webpush'],
  ['hms'],
  ['onesignal'],
  ['hms', 'onesignal'],
];

export interface Workload {
  devices: Map<string, ChaosDevice[]>;
  messages: ChaosMessage[];
  units: ChaosMessage[][];
  credits: ChaosCredit[];
}

export async function registerDevices(driver: CrmDriver, providers: Providers, scale: Load, rng: Random): Promise<Map<string, ChaosDevice[]>> {
  const devices = new Map<string, ChaosDevice[]>();
  for (let i = 0; i < scale.players; i += 1) {
    const userId = `p-${i}`;
    devices.set(userId, rng.pick(DEVICE_LAYOUTS).map((provider, n) => providers.newDevice(provider, userId, BRAND_ID, `${userId}-${n}`)));
  }
  const registering = new Pool(16);
  let failures = 0;
  for (const device of [...devices.values()].flat()) {
    await registering.add(async () => {
      const answer = await driver.call('/v1/devices', device.registration, {}, INTERNAL_KEY);
      if (answer.status !== 201 && answer.status !== 200) failures += 1;
    });
  }
  await registering.drain();
  driver.statuses.clear();
  if (failures) throw new Error(`${failures} devices could not be registered`);
  return devices;
}

/** 2% of messages to players with no device, 1% invalid. */
export async function planWorkload(databaseUrl: string, devices: Map<string, ChaosDevice[]>, scale: Load, rng: Random): Promise<Workload> {
  const players = [...devices.keys()];
  const messages: ChaosMessage[] = [];
  for (let i = 0; i < scale.messages; i += 1) {
    const activityId = 100000 + i;
    const roll = rng.next();
    const expect = roll < 0.02 ? 'no-device' : roll < 0.03 ? 'invalid' : 'accept';
    const userId = expect === 'no-device' ? `ghost-${i}` : rng.pick(players);
    const meta = { campaign: 'chaos', message: i, variant: rng.int(1, 4) };
    const body: Record<string, unknown> = {
      activity: { id: activityId, brand_id: BRAND_ID, user_id: userId, activity_id: 55, action_group_id: 2, trigger_hash: `th-${i}`, action_id: 3 },
      title: 'Weekend reload',
      body: `Your free spins are waiting (${i})`,
      meta,
    };
    if (expect === 'invalid') delete body.title;
    messages.push({ activityId, userId, expect, body, meta });
  }
  // About one message in seven goes alone (single); the rest in batches of 20 to 200.
  const units: ChaosMessage[][] = [];
  let batch: ChaosMessage[] = [];
  let batchSize = rng.int(20, 200);
  for (const message of messages) {
    if (rng.chance(0.15)) units.push([message]);
    else batch.push(message);
    if (batch.length >= batchSize) {
      units.push(batch);
      batch = [];
      batchSize = rng.int(20, 200);
    }
  }
  if (batch.length) units.push(batch);
  const bonusAmounts = new Map((await query<{ code: string; amount: string }>(databaseUrl, 'SELECT code, amount_minor::text AS amount FROM bonuses WHERE active')).map((b) => [b.code, Number(b.amount)]));
  const bonusCodes = [...bonusAmounts.keys()];
  const creditPlayers = Math.max(1, Math.ceil(scale.credits / 5));
  const credits: ChaosCredit[] = [];
  let userId = '';
  for (let i = 0; i < scale.credits; i += 1) {
    // Two credits a service id and player id, one in each brand, with the same headers: two wallets.
    if (i % 2 === 0) userId = `cp-${rng.int(0, creditPlayers - 1)}`;
    const serviceId = `chaos-credit-${Math.floor(i / 2)}`;
    const brand = CREDIT_BRANDS[i % 2];
    if (rng.chance(0.5)) {
      const code = rng.pick(bonusCodes);
      credits.push({ serviceId, brand, kind: 'bonus', userId, amountMinor: bonusAmounts.get(code)!, body: { user_id: userId, bonus_code: code, validity_amount: 7 } });
    } else {
      const amountMinor = rng.int(100, 5000);
      credits.push({ serviceId, brand, kind: 'funds', userId, amountMinor, body: { user_id: userId, amount: amountMinor / 100, currency: 'EUR', type: 'cashback' } });
    }
  }
  return { devices, messages, units, credits };
}

/** Spread over the scale's window, with 5% of acknowledged messages and 10% of credits sent again on purpose. */
export async function send(driver: CrmDriver, work: Workload, scale: Load, rng: Random, t0: number, log: (text: string) => void, faultCount: () => number): Promise<void> {
  const { messages, units, credits } = work;
  const resends: Promise<void>[] = [];
  const resendLater = (message: ChaosMessage) => {
    if (!message.pushId || !rng.chance(0.05)) return;
    const delay = rng.int(500, 8000);
    const asBatch = rng.chance(0.5);
    resends.push(sleep(delay).then(() => driver.resend(message, asBatch)));
  };
  const sendMessages = (async () => {
    const pool = new Pool(48);
    let sent = 0;
    for (const unit of units) {
      const wait = t0 + (sent / messages.length) * scale.sendMs - Date.now();
      if (wait > 0) await sleep(wait);
      sent += unit.length;
      await pool.add(async () => {
        if (unit.length === 1) await driver.single(unit[0]);
        else await driver.batch(unit);
        unit.forEach(resendLater);
      });
    }
    await pool.drain();
  })();
  const sendCredits = (async () => {
    const pool = new Pool(8);
    for (let i = 0; i < credits.length; i += 1) {
      const wait = t0 + (i / credits.length) * scale.sendMs - Date.now();
      if (wait > 0) await sleep(wait);
      const credit = credits[i];
      await pool.add(async () => {
        await driver.credit(credit);
        if (credit.creditId && rng.chance(0.1)) {
          await sleep(rng.int(200, 5000));
          await driver.credit(credit, true);
        }
      });
    }
    await pool.drain();
  })();
  const progress = setInterval(() => {
    const acked = messages.filter((m) => m.pushId).length;
    log(`${since(t0, Date.now())} ${acked} messages and ${credits.filter((c) => c.creditId).length} credits acknowledged, ${faultCount()} faults so far`);
  }, 15000);
  try {
    await Promise.all([sendMessages, sendCredits]);
    await Promise.all(resends);
  } finally {
    clearInterval(progress);
  }
}

export interface Settling {
  settled: boolean;
  settleMs: number;
  last: string;
}

/**
 * Waits until everything acknowledged is final, or what is left stops moving. `databaseUrl` is
 * asked at each look: it moves in a failover.
 */
export async function settle(databaseUrl: () => string, scale: Load, from: number, log: (text: string) => void): Promise<Settling> {
  let last = '';
  const changed = new Map<string, { value: string; at: number }>();
  let settled = false;
  while (Date.now() - from < scale.settleMs) {
    const [row] = await query<{ messages: string; deliveries: string; events: string; credits: string }>(
      databaseUrl(),
      `SELECT (SELECT count(*) FROM messages WHERE status = 'accepted') AS messages,
              (${DELIVERIES_TO_SEND_SQL}) AS deliveries,
              (SELECT count(*) FROM events e
                WHERE e.feed_seq > COALESCE(LEAST((SELECT c.position FROM dispatch_cursors c WHERE c.topic = e.topic),
                                                  (SELECT min(r.after_position) FROM dispatch_ranges r WHERE r.topic = e.topic)), 0))
                + (SELECT count(*) FROM dispatch_retries WHERE state = 'pending') AS events,
              (SELECT count(*) FROM credits WHERE status = 'accepted') AS credits`,
    ).catch(() => [{ messages: '?', deliveries: '?', events: '?', credits: '?' }]);
    last = `${row.messages} messages and ${row.deliveries} deliveries not final, ${row.events} events not dispatched, ${row.credits} credits not carried out`;
    const counts = Object.entries(row);
    if (counts.every(([, value]) => value === '0')) {
      settled = true;
      break;
    }
    for (const [name, value] of counts) if (changed.get(name)?.value !== value) changed.set(name, { value, at: Date.now() });
    if (counts.every(([name, value]) => value === '0' || Date.now() - changed.get(name)!.at > scale.stallMs)) {
      log(`nothing left moved for ${scale.stallMs / 1000} s: ${last}`);
      break;
    }
    await sleep(1000);
  }
  const settleMs = Date.now() - from;
  log(settled ? `settled after ${(settleMs / 1000).toFixed(1)} s` : `not settled after ${(settleMs / 1000).toFixed(1)} s: ${last}`);
  return { settled, settleMs, last };
}

export async function creditRows(databaseUrl: string): Promise<CreditRows> {
  return {
    credits: await query(
      databaseUrl,
      `SELECT id, brand_id::text AS brand, idempotency_key AS "idempotencyKey", kind, user_id AS "userId", amount_minor::text AS "amountMinor", status, error FROM credits`,
    ),
    ledger: await query(
      databaseUrl,
      `SELECT e.transaction_id AS "transactionId", count(*)::text AS legs, sum(e.amount_minor)::text AS total,
              (sum(e.amount_minor) FILTER (WHERE a.owner <> 'house'))::text AS "playerLeg"
         FROM ledger_entries e JOIN accounts a ON a.id = e.account_id GROUP BY e.transaction_id`,
    ),
    accounts: await query(
      databaseUrl,
      `SELECT a.brand_id::text AS brand, a.owner, a.kind, a.balance_minor::text AS "balanceMinor", coalesce(sum(e.amount_minor), 0)::text AS "entriesMinor"
         FROM accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id GROUP BY a.id`,
    ),
    playerBonuses: await query(databaseUrl, `SELECT id, credit_id AS "creditId" FROM player_bonuses`),
    balanceEvents: await query(databaseUrl, `SELECT body::text AS body FROM events WHERE topic = 'balance'`),
  };
}

/** Answers how many failed. */
export function printChecks(checks: Check[], suite: string): number {
  console.log('checks:');
  checks.forEach((check, i) => {
    console.log(`${check.ok ? 'ok  ' : 'FAIL'} ${i + 1}. ${check.name}`);
    for (const line of check.lines) console.log(`       ${line}`);
  });
  const failed = checks.filter((c) => !c.ok).length;
  console.log(`\n${suite}: ${checks.length - failed} passed, ${failed} failed`);
  return failed;
}
