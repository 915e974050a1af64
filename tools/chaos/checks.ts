// The verdicts of a run, from what the provider servers and the CRM received and what the
// database holds. Each check says exactly what it counted.
import { isDeepStrictEqual } from 'node:util';
import type { CrmRequest } from '@operator/testing';
import { PROVIDER_NAMES as PROVIDERS } from '@operator/provider-registry';
import type { Answer, ChaosCredit, ChaosMessage, CrmDriver } from './crm';
import { FAILOVER_KINDS, type Fault } from './faults';
import type { ChaosDevice, Receipt } from './providers';
import { since } from './util';

export interface Check {
  name: string;
  ok: boolean;
  lines: string[];
}

export interface RunRecord {
  t0: number;
  messages: ChaosMessage[];
  credits: ChaosCredit[];
  devices: Map<string, ChaosDevice[]>;
  receipts: Receipt[];
  webhook: CrmRequest[];
  faults: Fault[];
  driver: CrmDriver;
  /** A push worker's jobs at once × messages of a job at once: the sends a failover can leave unrecorded (and a kill, without killBound). */
  inFlightBound: number;
  inFlightWindowMs: number;
  /** The repeats a kill at `at` may explain: sends on the wire and answers not yet written. */
  killBound?: (provider: string, at: number) => { bound: number; how: string };
}

/** The faults that can lose or repeat a send (the CRM's webhook cannot). */
const STORE_AND_APP_FAULTS: Fault['kind'][] = ['kill', 'crash', 'pg-cut', 'redis-crash', ...FAILOVER_KINDS];

const sample = <T>(items: T[], n = 5) => items.slice(0, n);

/** The fault whose window (with a margin) holds a moment. */
function faultAround(faults: Fault[], at: number, t0: number, marginMs = 2000, kinds?: Fault['kind'][]): string {
  const hit = faults.filter((f) => (!kinds || kinds.includes(f.kind)) && at >= f.at - marginMs && at <= (f.endAt ?? f.at) + marginMs);
  if (!hit.length) return 'no fault nearby';
  return hit.map((f) => `${f.kind}${f.target ? ` ${f.target}` : ''} ${since(t0, f.at)}`).join(', ');
}

function groupCount(keys: string[]): string {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]).map(([key, n]) => `${n} × ${key}`).join('; ');
}

/** How long before a fault the first copies of its duplicates were received, in buckets. */
function ageBuckets(ages: number[]): string {
  const edges = [100, 250, 500, 1000, 2000, Infinity];
  const counts = edges.map(() => 0);
  for (const age of ages) counts[edges.findIndex((edge) => age <= edge)] += 1;
  return edges.map((edge, i) => (counts[i] ? `${counts[i]} ${edge === Infinity ? 'older' : `<= ${edge} ms`}` : '')).filter(Boolean).join(', ');
}

function receiptIndex(receipts: Receipt[]): Map<string, Map<string, number[]>> {
  const index = new Map<string, Map<string, number[]>>();
  for (const receipt of receipts) {
    if (!receipt.pushId) continue;
    const key = `${receipt.provider}:${receipt.device}`;
    let byPush = index.get(key);
    if (!byPush) index.set(key, (byPush = new Map()));
    const times = byPush.get(receipt.pushId);
    if (times) times.push(receipt.at);
    else byPush.set(receipt.pushId, [receipt.at]);
  }
  for (const byPush of index.values()) for (const times of byPush.values()) times.sort((a, b) => a - b);
  return index;
}

/** 1. Every acknowledged push reached each of its player's devices, and its status came back with its meta. */
export function checkNothingLost(run: RunRecord): Check {
  const index = receiptIndex(run.receipts);
  const acked = run.messages.filter((m) => m.pushId);
  const lost: { message: ChaosMessage; device: ChaosDevice }[] = [];
  let deliveries = 0;
  for (const message of acked) {
    for (const device of run.devices.get(message.userId) ?? []) {
      deliveries += 1;
      if (!index.get(`${device.provider}:${device.key}`)?.get(message.pushId!)?.length) lost.push({ message, device });
    }
  }
  const ackedIds = new Set(acked.map((m) => m.pushId!));
  const unknown = run.receipts.filter((r) => r.pushId && !ackedIds.has(r.pushId));

  // Status events, as the CRM keeps them: repeats of one event_id dropped.
  const events = new Map<string, Map<string, any>>();
  for (const request of run.webhook) {
    const body = request.json;
    if (request.path !== '/push-status' || !body?.push_id || !body.event_id) continue;
    let byId = events.get(body.push_id);
    if (!byId) events.set(body.push_id, (byId = new Map()));
    byId.set(body.event_id, body);
  }
  const noStatus: ChaosMessage[] = [];
  const failedStatus: ChaosMessage[] = [];
  const twice: ChaosMessage[] = [];
  const wrongMeta: ChaosMessage[] = [];
  for (const message of acked) {
    const finals = [...(events.get(message.pushId!)?.values() ?? [])].filter((e) => e.status === 'sent' || e.status === 'failed');
    if (!finals.length) noStatus.push(message);
    if (finals.some((e) => e.status === 'failed')) failedStatus.push(message);
    if (finals.length > 1) twice.push(message);
    if (finals.some((e) => !isDeepStrictEqual(e.meta, message.meta) || e.activity?.id !== message.activityId)) wrongMeta.push(message);
  }

  const lostMessages = new Set(lost.map((l) => l.message));
  const lines = [
    `${acked.length} pushes acknowledged to the CRM, ${deliveries} deliveries (player's devices); ${lost.length} deliveries of ${lostMessages.size} pushes never reached their device`,
  ];
  if (lost.length) {
    lines.push(`  lost by provider: ${groupCount(lost.map((l) => l.device.provider))}`);
    lines.push(`  lost pushes by the fault around their acknowledgement: ${groupCount([...lostMessages].map((m) => faultAround(run.faults, m.ackAt!, run.t0, 2000, STORE_AND_APP_FAULTS)))}`);
    for (const { message, device } of sample(lost)) lines.push(`  e.g. push ${message.pushId} (activity ${message.activityId}) to ${device.provider} ${device.key.slice(0, 16)}, acknowledged ${since(run.t0, message.ackAt!)}`);
  }
  lines.push(`${unknown.length} sends of push ids the CRM was never given`);
  lines.push(
    `status events: ${acked.length - noStatus.length} pushes reported sent/failed; ${noStatus.length} never reported, ${failedStatus.length} reported failed, ${twice.length} reported twice (different event_ids), ${wrongMeta.length} with the wrong meta or activity`,
  );
  for (const message of sample(noStatus, 3)) lines.push(`  e.g. no status for push ${message.pushId}, acknowledged ${since(run.t0, message.ackAt!)} (${faultAround(run.faults, message.ackAt!, run.t0)})`);
  for (const message of sample(twice, 3)) {
    const ids = [...events.get(message.pushId!)!.values()].map((e) => `${e.status} ${e.event_id}`);
    lines.push(`  e.g. push ${message.pushId} reported as ${ids.join(', ')}`);
  }
  const ok = acked.length > 0 && !lost.length && !unknown.length && !noStatus.length && !failedStatus.length && !twice.length && !wrongMeta.length;
  return { name: 'nothing lost: every acknowledged push reached each device and its status came back, once, with its meta', ok, lines };
}

/** Providers that take a repeated send as the same one (its idempotency key): no duplicate of theirs is explained. */
const IDEMPOTENT_PROVIDERS = new Set(['onesignal']);

/** 2. A push received twice only for sends in flight at a worker's kill or a store's failover, within their bounds. */
export function checkDuplicates(run: RunRecord): Check {
  const index = receiptIndex(run.receipts);
  const explainers = run.faults.flatMap((f) => {
    if ((f.kind === 'kill' || f.kind === 'crash') && f.target?.startsWith('push-worker-')) {
      const provider = f.target.slice('push-worker-'.length).replace(/-\d+$/, '');
      const { bound, how } = run.killBound?.(provider, f.at) ?? { bound: run.inFlightBound, how: `${run.inFlightBound}` };
      return [{ fault: f, provider, explained: 0, ages: [] as number[], bound, how }];
    }
    if (FAILOVER_KINDS.includes(f.kind as never)) {
      return PROVIDERS.map((provider) => ({ fault: f, provider, explained: 0, ages: [] as number[], bound: run.inFlightBound, how: `${run.inFlightBound}` }));
    }
    return [];
  });
  const unexplained: { device: string; pushId: string; first: number; again: number }[] = [];
  let copies = 0;
  for (const [deviceKey, byPush] of index) {
    const provider = deviceKey.slice(0, deviceKey.indexOf(':'));
    for (const [pushId, times] of byPush) {
      for (let j = 1; j < times.length; j += 1) {
        copies += 1;
        const first = times[j - 1];
        const again = times[j];
        // Until the killed worker's replacement starts (endAt) no other process sends for that
        // provider, so a first copy up to then is still one of the killed worker's.
        const explainer = IDEMPOTENT_PROVIDERS.has(provider) ? undefined : explainers.find(
          (k) =>
            k.provider === provider &&
            first <= (k.fault.endAt ?? k.fault.at) &&
            k.fault.at - first <= run.inFlightWindowMs &&
            again > k.fault.at &&
            k.explained < k.bound,
        );
        if (explainer) {
          explainer.explained += 1;
          explainer.ages.push(explainer.fault.at - first);
        } else unexplained.push({ device: deviceKey, pushId, first, again });
      }
    }
  }
  const lines = [`${copies} extra copies received (same push, same device); ${copies - unexplained.length} from sends in flight at a worker kill or a failover, ${unexplained.length} unexplained`];
  for (const provider of IDEMPOTENT_PROVIDERS) {
    const kills = run.faults.filter((f) => (f.kind === 'kill' || f.kind === 'crash') && f.target?.startsWith(`push-worker-${provider}`)).length;
    const sends = run.receipts.filter((r) => r.provider === provider).length;
    lines.push(`  ${provider}: ${unexplained.filter((u) => u.device.startsWith(`${provider}:`)).length} duplicates in ${sends} deliveries, ${kills} kills of its worker (idempotent requests: none may be explained)`);
  }
  for (const { fault, provider, explained, ages, bound, how } of explainers) {
    if (fault.kind === 'kill' || fault.kind === 'crash' || explained) {
      lines.push(`  ${fault.kind} ${fault.target ?? provider} ${since(run.t0, fault.at)}: ${explained} in-flight duplicates (bound ${how === String(bound) ? bound : `${bound}: ${how}`})${ages.length ? `; first copies before it: ${ageBuckets(ages)}` : ''}`);
    }
  }
  if (unexplained.length) {
    lines.push(`  unexplained, by the fault around the first copy: ${groupCount(unexplained.map((u) => faultAround(run.faults, u.first, run.t0, 5000, STORE_AND_APP_FAULTS)))}`);
    for (const u of sample(unexplained)) {
      lines.push(`  e.g. ${u.device.slice(0, 24)} push ${u.pushId}: ${since(run.t0, u.first)} and again ${since(run.t0, u.again)}`);
    }
  }
  return { name: 'duplicates only from sends in flight at a worker kill or a failover', ok: unexplained.length === 0, lines };
}

export interface CreditRows {
  credits: { id: string; brand: string; idempotencyKey: string; kind: string; userId: string; amountMinor: string; status: string; error: string | null }[];
  ledger: { transactionId: string; legs: string; total: string; playerLeg: string | null }[];
  accounts: { brand: string; owner: string; kind: string; balanceMinor: string; entriesMinor: string }[];
  playerBonuses: { id: string; creditId: string }[];
  /** The balance events of the outbox, their bodies as stored (and posted). */
  balanceEvents: { body: string }[];
}

/**
 * 3. Each X-Service-Id credited exactly once in each brand (credits, ledger, the brand's balances)
 * and its bonus event sent once.
 */
export function checkCredits(run: RunRecord, rows: CreditRows): Check {
  const lines: string[] = [];
  const problems: string[] = [];
  const acked = run.credits.filter((c) => c.creditId);
  const byKey = new Map<string, CreditRows['credits']>();
  for (const row of rows.credits) byKey.set(`${row.brand}/${row.idempotencyKey}`, [...(byKey.get(`${row.brand}/${row.idempotencyKey}`) ?? []), row]);
  const ledger = new Map(rows.ledger.map((l) => [l.transactionId, l]));
  for (const credit of acked) {
    const key = `${credit.brand}/${credit.serviceId}`;
    const found = byKey.get(key) ?? [];
    if (found.length !== 1) {
      problems.push(`${key}: ${found.length} credit rows`);
      continue;
    }
    const [row] = found;
    if (row.id !== credit.creditId) problems.push(`${key}: row ${row.id}, the CRM was answered ${credit.creditId}`);
    if (row.status !== 'completed') problems.push(`${key}: ${row.status}${row.error ? ` (${row.error})` : ''}`);
    const tx = ledger.get(row.id);
    if (!tx) problems.push(`${key}: no ledger transaction`);
    else if (tx.legs !== '2' || tx.total !== '0' || tx.playerLeg !== String(credit.amountMinor)) {
      problems.push(`${key}: ledger ${tx.legs} legs, total ${tx.total}, player ${tx.playerLeg}, expected ${credit.amountMinor}`);
    }
  }
  const known = new Set(run.credits.map((c) => `${c.brand}/${c.serviceId}`));
  const strangers = rows.credits.filter((r) => !known.has(`${r.brand}/${r.idempotencyKey}`));
  if (strangers.length) problems.push(`${strangers.length} credit rows with keys the CRM never sent in their brand`);

  // Balances: what the player should hold in each brand, from the credits the CRM had acknowledged.
  const expected = new Map<string, bigint>();
  for (const credit of acked) {
    const key = `${credit.brand}/${credit.userId}/${credit.kind === 'bonus' ? 'bonus_money' : 'real_money'}`;
    expected.set(key, (expected.get(key) ?? 0n) + BigInt(credit.amountMinor));
  }
  const held = new Map(rows.accounts.filter((a) => a.owner !== 'house').map((a) => [`${a.brand}/${a.owner}/${a.kind}`, BigInt(a.balanceMinor)]));
  const wrongBalances = [...new Set([...expected.keys(), ...held.keys()])].filter((key) => (expected.get(key) ?? 0n) !== (held.get(key) ?? 0n));
  for (const key of sample(wrongBalances)) problems.push(`balance ${key}: ${held.get(key) ?? 0n}, expected ${expected.get(key) ?? 0n}`);
  const drift = rows.accounts.filter((a) => a.balanceMinor !== a.entriesMinor);
  for (const account of sample(drift)) problems.push(`account ${account.brand}/${account.owner}/${account.kind}: balance ${account.balanceMinor}, entries sum to ${account.entriesMinor}`);

  // Bonus events, as the CRM keeps them. They carry no event_id, so a repeat of one outbox event is
  // told by its body (stored once, sent byte for byte again); a second event is a different body.
  const bonusRequests = run.webhook.filter((r) => r.path === '/v1/integration/bonus' && r.json);
  const distinct = new Map<string, any>();
  for (const request of bonusRequests) distinct.set(request.json.event_id ?? request.body, request.json);
  const perStatus = new Map<string, any[]>();
  for (const event of distinct.values()) {
    const key = `${event.user_bonus_id}/${event.status}`;
    perStatus.set(key, [...(perStatus.get(key) ?? []), event]);
  }
  const bonusOf = new Map(rows.playerBonuses.map((b) => [b.creditId, b.id]));
  let createdOnce = 0;
  for (const credit of acked.filter((c) => c.kind === 'bonus')) {
    const userBonusId = bonusOf.get(credit.creditId!);
    const created = userBonusId ? (perStatus.get(`${userBonusId}/Created`) ?? []) : [];
    if (created.length === 1 && created[0].service_references?.id === credit.serviceId && created[0].user_id === credit.userId) createdOnce += 1;
    else problems.push(`${credit.serviceId}: ${created.length} Created events for user bonus ${userBonusId ?? '(none)'}${created.length === 1 ? ' with the wrong service_references or user' : ''}`);
  }
  const repeatedStatus = [...perStatus].filter(([, events]) => events.length > 1);
  for (const [key, events] of sample(repeatedStatus)) problems.push(`bonus event ${key}: ${events.length} different events`);
  // A balance event has no event_id, and the two wallets of a pair's player (one in each brand) can
  // hold the same balances at the same millisecond: two events, one body. So the outbox is counted
  // (one event a completed credit), and each of its bodies must have been received.
  const balanceEvents = new Set(run.webhook.filter((r) => r.path === '/v1/integration/user/balances').map((r) => r.json?.event_id ?? r.body));
  const completed = rows.credits.filter((r) => r.status === 'completed').length;
  if (rows.balanceEvents.length !== completed) problems.push(`${rows.balanceEvents.length} balance events in the outbox for ${completed} completed credits`);
  const unreceived = rows.balanceEvents.filter((event) => !balanceEvents.has(event.body));
  for (const event of sample(unreceived)) problems.push(`balance event never received: ${event.body}`);

  const gaveUp = run.credits.filter((c) => c.gaveUp || c.refused);
  if (gaveUp.length) problems.push(`${gaveUp.length} credits never answered 200 (${groupCount(gaveUp.map((c) => c.refused ?? 'gave up at the deadline'))})`);

  lines.push(
    `${acked.length} of ${run.credits.length} credits acknowledged (${run.driver.resends.credits} sent again after their 200); ${rows.credits.length} credit rows, ${rows.credits.filter((r) => r.status === 'completed').length} completed`,
    `by brand: ${[...new Set(rows.credits.map((r) => r.brand))].sort().map((brand) => `${rows.credits.filter((r) => r.brand === brand).length} in brand ${brand}`).join(', ')}`,
    `ledger: ${rows.ledger.length} transactions; ${wrongBalances.length} player balances off; ${drift.length} accounts whose balance is not the sum of their entries`,
    `bonus events: ${bonusRequests.length} received, ${distinct.size} distinct; ${createdOnce} bonus credits with exactly one Created event; ${repeatedStatus.length} (user_bonus_id, status) with more than one event`,
    `balance events: ${rows.balanceEvents.length} in the outbox for ${completed} completed credits, ${unreceived.length} never received; ${balanceEvents.size} distinct bodies received`,
  );
  for (const problem of sample(problems, 10)) lines.push(`  ${problem}`);
  if (problems.length > 10) lines.push(`  ... ${problems.length - 10} more`);
  return { name: 'credits and bonus events exactly once', ok: problems.length === 0 && acked.length > 0, lines };
}

/** 4. Every answer the CRM got was a contract answer: no 5xx but 503. */
export function checkStatuses(run: RunRecord): Check {
  const lines = [...run.driver.statuses].map(
    ([path, byStatus]) => `${path}: ${[...byStatus].sort().map(([status, n]) => `${status} × ${n}`).join(', ')}`,
  );
  for (const bad of sample(run.driver.bad5xx)) lines.push(`  ${since(run.t0, bad.at)} ${bad.path} ${bad.status}: ${bad.body}`);
  return { name: 'no 5xx answered but 503', ok: run.driver.bad5xx.length === 0, lines };
}

/** 5. Answers the CRM can rely on: resends get the first push_id or credit_id, the right messages are refused, nothing left unanswered. */
export function checkAnswers(run: RunRecord): Check {
  const expectedAccepted = run.messages.filter((m) => m.expect === 'accept');
  const gaveUp = run.messages.filter((m) => m.gaveUp && !m.pushId);
  const refusedRight = run.messages.filter((m) => m.expect !== 'accept' && m.refused && !m.pushId).length;
  const lines = [
    `${expectedAccepted.filter((m) => m.pushId).length} of ${expectedAccepted.length} deliverable messages acknowledged; ${refusedRight} of ${run.messages.length - expectedAccepted.length} undeliverable ones refused (4xx / failed)`,
    `${run.driver.resends.messages} acknowledged messages sent again`,
    `${gaveUp.length} messages still unacknowledged at the deadline`,
    `${run.driver.anomalies.length} unexpected answers`,
  ];
  for (const anomaly of sample(run.driver.anomalies, 8)) lines.push(`  ${since(run.t0, anomaly.at)} ${anomaly.what}`);
  return { name: 'answers as the contract says (same push_id and credit_id on resends, nothing left unanswered)', ok: run.driver.anomalies.length === 0 && gaveUp.length === 0, lines };
}

/**
 * 6. After each failover, each gateway answers 2xx again within `withinMs`: the first 2xx after
 * its last 503 or failed connection before the next failover (no such answer: it never failed).
 */
export function checkRecovery(run: RunRecord, gateways: number, withinMs: number): Check {
  const failovers = run.faults.filter((f) => FAILOVER_KINDS.includes(f.kind as never)).sort((a, b) => a.at - b.at);
  const failed = (answer: Answer) => answer.status === undefined || answer.status >= 500;
  const lines: string[] = [];
  let ok = failovers.length > 0;
  failovers.forEach((fault, i) => {
    const next = failovers[i + 1]?.at ?? Infinity;
    for (let gateway = 0; gateway < gateways; gateway += 1) {
      const answers = run.driver.answers.filter((a) => a.gateway === gateway && a.at >= fault.at && a.at < next);
      const failures = answers.filter(failed);
      const lastFailure = failures.at(-1);
      const back = lastFailure ? answers.find((a) => a.at > lastFailure.at && a.status! >= 200 && a.status! < 300) : answers.find((a) => a.status! >= 200 && a.status! < 300);
      const tookMs = lastFailure ? (back ? back.at - fault.at : Infinity) : 0;
      if (!(tookMs <= withinMs) || !answers.length) ok = false;
      const outage = failures.length ? `${failures.length} answers 503 or failed from ${since(run.t0, failures[0].at)} to ${since(run.t0, lastFailure!.at)}, ` : 'no 503, ';
      lines.push(`${fault.kind} ${since(run.t0, fault.at)}, gateway ${gateway + 1}: ${outage}${back ? `2xx again ${((back.at - fault.at) / 1000).toFixed(1)} s after the failover began` : 'no 2xx after it'} (${answers.length} answers)`);
    }
  });
  if (!failovers.length) lines.push('no failover happened');
  return { name: `each gateway answers 2xx again within ${withinMs / 1000} s of each failover`, ok, lines };
}
