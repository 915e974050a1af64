import { v7 as uuidv7 } from 'uuid';
import type { CrmHeaders, ProviderName, PushRequest } from '@operator/contract';
import {
  acceptIsolation,
  acceptStatement,
  DEFAULT_DEDUPE,
  findPushIds,
  inTransactionFrom,
  isDbUnavailable,
  messageKey,
  storedMessages,
  type AcceptedRow,
  type Db,
  type NewMessage,
} from '@operator/db';
import { acceptedMessages, NO_BRAND, type AcceptMode, type AcceptResult } from '@operator/metrics';
import { enqueueSendJobs, redisReady, type PushQueues, type RedisClient, type SendJobPolicy, type SendJobRequest } from '@operator/queue';
import { UnavailableError } from './errors';

export interface AcceptDeps {
  db: Db;
  redis: RedisClient;
  queues: PushQueues;
  /** Messages per send job; a batch becomes a few jobs per provider, not one per message. */
  jobMaxMessages: number;
  /** Attempts and backoff of the send jobs. */
  sendPolicy: SendJobPolicy;
  /** How many days before today a retried push is looked for (PUSH_DEDUPE_DAYS, default 2). */
  dedupeDays?: number;
  /** The metrics' brand label of a message's brand (brandLabeler); none without it. */
  brandLabel?: (brandId: number | undefined) => string;
}

/** What became of one message. */
export type Outcome =
  /** `duplicate`: accepted before (a CRM retry, or the same message twice in one request), answered with its first push_id. */
  | { kind: 'accepted'; pushId: string; duplicate: boolean }
  | { kind: 'unreachable'; error: string }
  | { kind: 'fatal'; error: string };

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
    deliveryId: uuidv7(),
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
 * A message is answered as accepted only once it is committed in PostgreSQL, naming its
 * deliveries, and its send job is in Redis: the jobs are added inside the transaction, just before
 * it commits, so a failure of either store leaves neither. Messages already accepted (a CRM retry,
 * or an identical request racing this one) are answered with their first push_id and not queued
 * again. Throws UnavailableError when a store is down, so the whole request is answered 503.
 * `mode` says whether the requests came as singles (stored together) or as a batch, for the metrics.
 */
export function acceptMessages(
  deps: AcceptDeps,
  requests: PushRequest[],
  headers: CrmHeaders | readonly CrmHeaders[],
  rawMetas: readonly (string | undefined)[] = [],
  mode: AcceptMode = 'batch',
): Promise<Outcome[]> {
  const label = deps.brandLabel ?? (() => NO_BRAND);
  return counted(mode, requests.map((request) => label(request.activity.brand_id)), acceptOnce(deps, requests, headers, rawMetas));
}

/**
 * Counts each message in operator_messages_accepted_total by its outcome and brand; when the request fails
 * as a whole (503), every message of it is fatal: the CRM sends them all again. (Messages refused
 * before they get here, as invalid, are counted by the gateway.)
 */
async function counted(mode: AcceptMode, brands: string[], accepting: Promise<Outcome[]>): Promise<Outcome[]> {
  const counts = new Map<string, { result: AcceptResult; brand: string; count: number }>();
  const count = (result: AcceptResult, brand: string) => {
    const key = `${result} ${brand}`;
    const entry = counts.get(key);
    if (entry) entry.count++;
    else counts.set(key, { result, brand, count: 1 });
  };
  let outcomes: Outcome[] | undefined;
  try {
    outcomes = await accepting;
  } finally {
    brands.forEach((brand, i) => {
      const outcome = outcomes?.[i];
      const result = !outcome ? 'fatal' : outcome.kind === 'accepted' ? (outcome.duplicate ? 'duplicate' : 'accepted') : outcome.kind;
      count(result, brand);
    });
    for (const { result, brand, count: n } of counts.values()) acceptedMessages(mode, result, n, brand);
  }
  return outcomes!;
}

async function acceptOnce(
  deps: AcceptDeps,
  requests: PushRequest[],
  headers: CrmHeaders | readonly CrmHeaders[],
  rawMetas: readonly (string | undefined)[],
): Promise<Outcome[]> {
  if (!redisReady(deps.redis)) throw new UnavailableError('queue is unavailable, retry later');
  const headersOf = Array.isArray(headers) ? (i: number) => headers[i] : () => headers as CrmHeaders;
  const messages = requests.map((request, i) => toNewMessage(request, headersOf(i), rawMetas[i]));
  const keys = messages.map(messageKey);
  // A key given twice is stored once; both get its outcome.
  const unique = new Map<string, NewMessage>();
  messages.forEach((message, i) => {
    if (!unique.has(keys[i])) unique.set(keys[i], message);
  });
  const outcomes = unique.size ? await storeAll(deps, [...unique.values()]) : new Map<string, Outcome>();
  return keys.map((key, i) => {
    const outcome = outcomes.get(key)!;
    const repeated = unique.get(key) !== messages[i] && outcome.kind === 'accepted';
    return repeated ? { ...outcome, duplicate: true } : outcome;
  });
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
async function storeAll(deps: AcceptDeps, messages: NewMessage[]): Promise<Map<string, Outcome>> {
  try {
    return await storeInTransaction(deps, messages);
  } catch (error) {
    if (isOutage(deps, error)) unavailable(error);
    if (messages.length === 1) return new Map([[messageKey(messages[0]), FATAL]]);
  }
  const half = Math.ceil(messages.length / 2);
  const first = await storeAll(deps, messages.slice(0, half));
  const second = await storeAll(deps, messages.slice(half));
  return new Map([...first, ...second]);
}

/** Tries of a serializable accepting transaction (around midnight) that another one conflicted with. */
const SERIALIZATION_TRIES = 5;

/**
 * One statement finds, inserts and fans out (acceptStatement), sent with the transaction's BEGIN;
 * the jobs go to Redis before the commit. Around midnight the transaction is serializable
 * (acceptIsolation), and tried again when it loses to a concurrent one (a job it queued before
 * failing is a job for pushes that are not stored: the worker finds none and drops it).
 */
async function storeInTransaction(deps: AcceptDeps, messages: NewMessage[]): Promise<Map<string, Outcome>> {
  for (let tries = 1; ; tries++) {
    const isolation = acceptIsolation();
    try {
      return await storeOnce(deps, messages, isolation);
    } catch (error) {
      if (isolation !== 'serializable' || (error as { code?: string }).code !== '40001' || tries >= SERIALIZATION_TRIES) throw error;
    }
  }
}

async function storeOnce(deps: AcceptDeps, messages: NewMessage[], isolation: 'serializable' | 'read committed'): Promise<Map<string, Outcome>> {
  const window = deps.dedupeDays === undefined ? DEFAULT_DEDUPE : { dedupeDays: deps.dedupeDays };
  const begin = isolation === 'serializable' ? 'BEGIN ISOLATION LEVEL SERIALIZABLE' : 'BEGIN';
  return inTransactionFrom<AcceptedRow, Map<string, Outcome>>(deps.db, begin, acceptStatement(messages, window), async (tx, rows) => {
    const stored = storedMessages(messages, rows);
    const outcomes = new Map<string, Outcome>();
    const lost: NewMessage[] = [];
    const pushIdsByProvider = new Map<ProviderName, string[]>();
    stored.forEach((result, i) => {
      const message = messages[i];
      const key = messageKey(message);
      if (result.knownId) outcomes.set(key, { kind: 'accepted', pushId: result.knownId, duplicate: true });
      else if (result.insertedId) {
        outcomes.set(key, { kind: 'accepted', pushId: result.insertedId, duplicate: false });
        for (const provider of result.providers) {
          const ids = pushIdsByProvider.get(provider);
          if (ids) ids.push(result.insertedId);
          else pushIdsByProvider.set(provider, [result.insertedId]);
        }
      } else if (!result.reachable) {
        outcomes.set(key, { kind: 'unreachable', error: `player ${message.userId} has no active device for brand ${message.brandId}` });
      } else lost.push(message);
    });
    // Keys another request inserted meanwhile: the insert waited for it to commit, so they are visible now.
    if (lost.length) {
      const raced = await findPushIds(tx, lost, window);
      for (const message of lost) {
        const pushId = raced.get(messageKey(message));
        outcomes.set(messageKey(message), pushId ? { kind: 'accepted', pushId, duplicate: true } : FATAL);
      }
    }

    const jobs: SendJobRequest[] = [];
    for (const [provider, ids] of pushIdsByProvider) {
      for (const pushIds of chunk(ids, deps.jobMaxMessages)) jobs.push({ provider, pushIds });
    }
    try {
      await enqueueSendJobs(deps.queues, jobs, deps.sendPolicy);
    } catch (error) {
      throw new UnavailableError('queue is unavailable, retry later', { cause: error });
    }
    return outcomes;
  });
}
