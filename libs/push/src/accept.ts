import { v7 as uuidv7 } from 'uuid';
import type { CrmHeaders, PushRequest } from '@operator/contract';
import {
  findActiveDevices,
  findPushIds,
  inTransaction,
  insertDeliveries,
  insertMessages,
  isDbUnavailable,
  messageKey,
  type ActiveDevice,
  type Db,
  type NewDelivery,
  type NewMessage,
} from '@operator/db';
import { enqueueSendJobs, redisReady, type PushQueues, type Redis, type SendJobPolicy, type SendJobRequest } from '@operator/queue';
import { UnavailableError } from './errors';

export interface AcceptDeps {
  db: Db;
  redis: Redis;
  queues: PushQueues;
  /** Messages per send job; a batch becomes a few jobs per provider, not one per message. */
  jobMaxMessages: number;
  /** Attempts and backoff of the send jobs. */
  sendPolicy: SendJobPolicy;
}

/** What became of one message. */
export type Outcome =
  | { kind: 'accepted'; pushId: string }
  | { kind: 'unreachable'; error: string }
  | { kind: 'fatal'; error: string };

interface Pending {
  key: string;
  message: NewMessage;
  devices: ActiveDevice[];
}

const toBig = (value: number) => BigInt(value);

/** `meta` as the CRM wrote it when its raw text is known, else as serialized here. */
function metaText(request: PushRequest, rawMeta: string | undefined): string | null {
  if (rawMeta !== undefined && rawMeta !== 'null') return rawMeta;
  return request.meta === undefined ? null : JSON.stringify(request.meta);
}

function toNewMessage(request: PushRequest, headers: CrmHeaders, rawMeta: string | undefined): NewMessage {
  const { activity } = request;
  return {
    id: uuidv7(),
    brandId: toBig(activity.brand_id),
    crmMessageId: toBig(activity.id),
    userId: activity.user_id,
    activityId: toBig(activity.activity_id),
    actionGroupId: toBig(activity.action_group_id),
    actionId: toBig(activity.action_id),
    triggerHash: activity.trigger_hash,
    origin: activity.origin ?? null,
    payload: request,
    meta: metaText(request, rawMeta),
    crmHeaders: headers,
  };
}

function chunk<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function unavailable(error: unknown): never {
  if (error instanceof UnavailableError) throw error;
  throw new UnavailableError('message store is unavailable, retry later', { cause: error });
}

/**
 * Accepts valid push requests exactly once per (activity.brand_id, activity.id). `headers` are the
 * CRM headers of all the requests (a batch's) or of each one (singles stored together); `rawMetas`
 * holds each request's `meta` as the CRM wrote it, so it can be returned byte for byte.
 *
 * A message is answered as accepted only once it is committed in PostgreSQL together with its
 * deliveries, and its send job is in Redis: the jobs are added inside the transaction, just before
 * it commits, so a failure of either store leaves neither. Messages already accepted (a CRM retry,
 * or an identical request racing this one) are answered with their first push_id and not queued
 * again. Throws UnavailableError when a store is down, so the whole request is answered 503.
 */
export async function acceptMessages(
  deps: AcceptDeps,
  requests: PushRequest[],
  headers: CrmHeaders | readonly CrmHeaders[],
  rawMetas: readonly (string | undefined)[] = [],
): Promise<Outcome[]> {
  if (!redisReady(deps.redis)) throw new UnavailableError('queue is unavailable, retry later');
  const headersOf = Array.isArray(headers) ? (i: number) => headers[i] : () => headers as CrmHeaders;
  const messages = requests.map((request, i) => toNewMessage(request, headersOf(i), rawMetas[i]));
  const keys = messages.map(messageKey);

  let known: Map<string, string>;
  let devices: ActiveDevice[];
  try {
    // Both lookups at once, on two connections: a retried message needs only the first.
    [known, devices] = await Promise.all([findPushIds(deps.db.pool, messages), findActiveDevices(deps.db.pool, messages)]);
  } catch (error) {
    unavailable(error);
  }

  const devicesOf = new Map<string, ActiveDevice[]>();
  for (const device of devices) {
    const target = `${device.brandId}:${device.userId}`;
    const list = devicesOf.get(target);
    if (list) list.push(device);
    else devicesOf.set(target, [device]);
  }

  const outcomes = new Map<string, Outcome>();
  const pending = new Map<string, Pending>();
  messages.forEach((message, i) => {
    const key = keys[i];
    const pushId = known.get(key);
    if (pushId) outcomes.set(key, { kind: 'accepted', pushId });
    else if (pending.has(key) || outcomes.has(key)) return;
    else {
      const reachable = devicesOf.get(`${message.brandId}:${message.userId}`) ?? [];
      if (reachable.length) pending.set(key, { key, message, devices: reachable });
      else outcomes.set(key, { kind: 'unreachable', error: `player ${message.userId} has no active device for brand ${message.brandId}` });
    }
  });

  if (pending.size) {
    const stored = await storeAll(deps, [...pending.values()]);
    for (const [key, outcome] of stored) outcomes.set(key, outcome);
  }
  return keys.map((key) => outcomes.get(key)!);
}

const FATAL: Outcome = { kind: 'fatal', error: 'message could not be stored, retry later' };

function isOutage(deps: AcceptDeps, error: unknown): boolean {
  return error instanceof UnavailableError || isDbUnavailable(error) || !redisReady(deps.redis);
}

/**
 * Stores and queues in one transaction. When that fails for a reason other than an outage, stores
 * each half on its own, down to single messages, so that one row the database refuses costs only
 * that message (fatal, retried by the CRM) and not the whole batch or group, in a few transactions
 * rather than one per message.
 */
async function storeAll(deps: AcceptDeps, pending: Pending[]): Promise<Map<string, Outcome>> {
  try {
    return await storeInTransaction(deps, pending);
  } catch (error) {
    if (isOutage(deps, error)) unavailable(error);
    if (pending.length === 1) return new Map([[pending[0].key, FATAL]]);
  }
  const half = Math.ceil(pending.length / 2);
  const first = await storeAll(deps, pending.slice(0, half));
  const second = await storeAll(deps, pending.slice(half));
  return new Map([...first, ...second]);
}

/** Rows in one order in every transaction, so two that insert some of the same keys never deadlock. */
function byKey(a: Pending, b: Pending): number {
  const { brandId: ab, crmMessageId: am } = a.message;
  const { brandId: bb, crmMessageId: bm } = b.message;
  return ab !== bb ? (ab < bb ? -1 : 1) : am === bm ? 0 : am < bm ? -1 : 1;
}

async function storeInTransaction(deps: AcceptDeps, unordered: Pending[]): Promise<Map<string, Outcome>> {
  const pending = [...unordered].sort(byKey);
  return inTransaction(deps.db, async (tx) => {
    const inserted = await insertMessages(
      tx,
      pending.map((item) => item.message),
    );
    const outcomes = new Map<string, Outcome>();
    const lost = pending.filter((item) => !inserted.has(item.message.id));
    // Rows another request inserted meanwhile: the insert waited for it to commit, so they are visible now.
    const raced = lost.length ? await findPushIds(
      tx,
      lost.map((item) => item.message),
    ) : new Map<string, string>();
    for (const item of lost) {
      const pushId = raced.get(item.key);
      outcomes.set(item.key, pushId ? { kind: 'accepted', pushId } : FATAL);
    }

    const won = pending.filter((item) => inserted.has(item.message.id));
    const deliveries: NewDelivery[] = [];
    const pushIdsByProvider = new Map<NewDelivery['provider'], Set<string>>();
    for (const { key, message, devices } of won) {
      for (const device of devices) {
        deliveries.push({ id: uuidv7(), messageId: message.id, deviceId: device.id, provider: device.provider });
        const ids = pushIdsByProvider.get(device.provider) ?? new Set<string>();
        ids.add(message.id);
        pushIdsByProvider.set(device.provider, ids);
      }
      outcomes.set(key, { kind: 'accepted', pushId: message.id });
    }
    await insertDeliveries(tx, deliveries);

    const jobs: SendJobRequest[] = [];
    for (const [provider, ids] of pushIdsByProvider) {
      for (const pushIds of chunk([...ids], deps.jobMaxMessages)) jobs.push({ provider, pushIds });
    }
    try {
      await enqueueSendJobs(deps.queues, jobs, deps.sendPolicy);
    } catch (error) {
      throw new UnavailableError('queue is unavailable, retry later', { cause: error });
    }
    return outcomes;
  });
}
