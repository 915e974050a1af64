import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LocalHttpsFake, readBody } from './fake-server';

// A local OneSignal REST API over TLS: POST /notifications checks the key, app id and body as
// OneSignal does (403 or 400 otherwise), answers with the notification id and
// errors.invalid_player_ids, and honours idempotency_key (a repeat delivers nothing). Tests script
// the rest: 429 with Retry-After, 5xx, a lost answer, no answer, a body too large to read.

/** OneSignal's answer to a bad key (its edge's words, double space included). */
export const ONESIGNAL_ACCESS_DENIED =
  "Access denied.  Please include an 'Authorization: ...' header with a valid API key (https://documentation.onesignal.com/docs/en/keys-and-ids#api-keys).";
export const ONESIGNAL_NONE_SUBSCRIBED = 'All included players are not subscribed';
export const ONESIGNAL_MAX_SUBSCRIPTIONS = 20_000;
const MAX_TTL_SECONDS = 28 * 24 * 3600;
const MAX_DATA_BYTES = 2048;
const MAX_COLLAPSE_ID = 64;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** "Keys must be unique v3 or v4 UUID format" (OneSignal's idempotent requests guide). */
const IDEMPOTENCY_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[34][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Push fields of the create-notification request; others are recorded in `unknownFields` (OneSignal ignores them). */
const KNOWN_FIELDS = new Set([
  'app_id', 'target_channel', 'include_subscription_ids', 'include_player_ids', 'include_aliases', 'included_segments',
  'excluded_segments', 'filters', 'idempotency_key', 'external_id', 'contents', 'headings', 'subtitle', 'name',
  'template_id', 'custom_data', 'data', 'url', 'web_url', 'app_url', 'ios_attachments', 'big_picture',
  'huawei_big_picture', 'adm_big_picture', 'chrome_web_image', 'small_icon', 'huawei_small_icon', 'large_icon',
  'huawei_large_icon', 'chrome_web_icon', 'firefox_icon', 'chrome_web_badge', 'android_channel_id',
  'existing_android_channel_id', 'huawei_channel_id', 'priority', 'ios_interruption_level', 'ios_sound',
  'android_sound', 'huawei_sound', 'ios_badgeType', 'ios_badgeCount', 'android_accent_color', 'huawei_accent_color',
  'android_led_color', 'android_visibility', 'android_group', 'android_group_message', 'collapse_id', 'web_push_topic',
  'apns_alert', 'ttl', 'thread_id', 'summary_arg', 'summary_arg_count', 'ios_relevance_score', 'ios_category',
  'content_available', 'mutable_content', 'target_content_identifier', 'buttons', 'web_buttons', 'send_after',
  'delayed_option', 'delivery_time_of_day', 'throttle_rate_per_minute', 'apns_push_type_override',
]);

/** A scripted answer to one request. `body` is sent as JSON. */
export interface OneSignalAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait this long before answering (on top of answerDelayMs). */
  delayMs?: number;
  /** Take the request as any other (the notification is made and delivered, its key remembered), then cut the connection unanswered. */
  dropAfterAccept?: boolean;
  /** Never answer: the connection stays open until the client gives up. */
  silent?: boolean;
  /** A body of this many bytes, written as fast as the client reads it. */
  bodyBytes?: number;
}

const retryAfter = (seconds: number | undefined): Record<string, string> | undefined => (seconds === undefined ? undefined : { 'Retry-After': String(seconds) });

/** Answers a test scripts often. */
export const oneSignalAnswers = {
  /** 429 "API rate limit exceeded." (OneSignal's limits are per app), with Retry-After when given. */
  rateLimited: (retryAfterSeconds?: number): OneSignalAnswer => ({ status: 429, body: { errors: ['API rate limit exceeded.'] }, headers: retryAfter(retryAfterSeconds) }),
  /** 401 with OneSignal's access-denied words. */
  unauthorized: (): OneSignalAnswer => ({ status: 401, body: { errors: [ONESIGNAL_ACCESS_DENIED] } }),
  /** A 5xx (500 Internal Server Error by default). */
  serverError: (status = 500, retryAfterSeconds?: number): OneSignalAnswer => ({ status, body: { errors: ['Internal Server Error'] }, headers: retryAfter(retryAfterSeconds) }),
  /** 503, OneSignal down for maintenance or overloaded. */
  unavailable: (retryAfterSeconds?: number): OneSignalAnswer => ({ status: 503, body: { errors: ['Service Unavailable'] }, headers: retryAfter(retryAfterSeconds) }),
  /** The notification is made and delivered, then the connection is cut before the answer. */
  lostAnswer: (): OneSignalAnswer => ({ status: 200, dropAfterAccept: true }),
  /** No answer, ever. */
  silent: (): OneSignalAnswer => ({ status: 0, silent: true }),
  /** `status` with a body of `bytes`. */
  huge: (bytes: number, status = 200): OneSignalAnswer => ({ status, bodyBytes: bytes }),
};

/** One request to the fake, whatever was answered. */
export interface FakeOneSignalRequest {
  at: number;
  method: string;
  /** Path and query as sent (`/notifications?c=push`). */
  url: string;
  authorization: string | undefined;
  /** The body as parsed ({} when it was not a JSON object). */
  body: Record<string, any>;
  subscriptionIds: string[];
  idempotencyKey: string | undefined;
  /** Top-level fields OneSignal does not know (it ignores them; a test usually wants none). */
  unknownFields: string[];
  /** 0: not answered (dropped, or no answer). */
  status: number;
  /** 'created', 'idempotent repeat', 'none subscribed', 'scripted', 'lost answer', or why it was refused. */
  reason: string;
  /** The notification made or answered (for an idempotent repeat, the first one's). */
  notificationId: string | null;
  /** Bytes of answer body written. */
  answeredBytes: number;
  /** Which connection it came on (numbered from 1 in the order they were first seen). */
  connection: number;
}

/** A push handed to one subscription. */
export interface FakeOneSignalDelivery {
  subscriptionId: string;
  notificationId: string;
  /** data.push_id of the request, when it had one. */
  pushId: string | undefined;
  request: FakeOneSignalRequest;
}

export interface FakeOneSignalOptions {
  appId?: string;
  restApiKey?: string;
  /** Every request is answered this long after it arrived. */
  answerDelayMs?: number;
  /** include_subscription_ids in one request at most (OneSignal: 20,000). */
  maxSubscriptionsPerRequest?: number;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const badRequest = (message: string) => new Refusal(400, message);

function isObject(value: unknown): value is Record<string, unknown> {
  return Boolean(value) && typeof value === 'object' && !Array.isArray(value);
}

function languageMap(body: Record<string, unknown>, field: string): Record<string, unknown> | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (!isObject(value) || Object.values(value).some((text) => typeof text !== 'string')) throw badRequest(`${field} must be an object of language codes to strings`);
  return value;
}

/** What OneSignal refuses in a create-notification body for push (the parts a client can get wrong). */
function checkBody(body: Record<string, unknown>, maxSubscriptions: number): void {
  if (body.target_channel !== undefined && body.target_channel !== 'push') throw badRequest('target_channel must be push, email or sms; this fake takes push');
  const ids = body.include_subscription_ids;
  if (!Array.isArray(ids) || ids.length === 0) throw badRequest('You must include which players, segments, or tags you wish to send this notification to.');
  if (ids.length > maxSubscriptions) throw badRequest(`include_subscription_ids: at most ${maxSubscriptions} entries per request`);
  for (const id of ids) {
    if (typeof id !== 'string' || !UUID.test(id)) throw badRequest(`Incorrect player_id format in include_player_ids (not a valid UUID): ${String(id).slice(0, 64)}`);
  }
  const contents = languageMap(body, 'contents');
  if (!contents || typeof contents.en !== 'string' || contents.en === '') throw badRequest('Message Notifications must have English language content');
  for (const field of ['headings', 'subtitle']) {
    const map = languageMap(body, field);
    const extra = Object.keys(map ?? {}).filter((language) => !(language in contents));
    if (extra.length) throw badRequest(`${field} has languages contents does not have: ${extra.join(', ')}`);
  }
  for (const field of ['idempotency_key', 'external_id']) {
    const key = body[field];
    if (key !== undefined && key !== null && (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))) throw badRequest(`${field} must be a v3 or v4 UUID`);
  }
  if (body.data !== undefined && (!isObject(body.data) || Buffer.byteLength(JSON.stringify(body.data)) > MAX_DATA_BYTES)) {
    throw badRequest(`data must be a JSON object of at most ${MAX_DATA_BYTES} bytes`);
  }
  if (body.ttl !== undefined && (!Number.isInteger(body.ttl) || (body.ttl as number) < 0 || (body.ttl as number) > MAX_TTL_SECONDS)) {
    throw badRequest(`ttl must be a whole number of seconds up to ${MAX_TTL_SECONDS}`);
  }
  if (body.priority !== undefined && !Number.isInteger(body.priority)) throw badRequest('priority must be an integer');
  if (body.android_accent_color !== undefined && !/^[0-9A-Fa-f]{8}$/.test(String(body.android_accent_color))) throw badRequest('android_accent_color must be ARGB hex, like FFFF0000');
  if (body.ios_badgeType !== undefined && !['None', 'SetTo', 'Increase'].includes(String(body.ios_badgeType))) throw badRequest('ios_badgeType must be None, SetTo or Increase');
  if (body.ios_badgeCount !== undefined && !Number.isInteger(body.ios_badgeCount)) throw badRequest('ios_badgeCount must be an integer');
  if (body.collapse_id !== undefined && (typeof body.collapse_id !== 'string' || body.collapse_id.length > MAX_COLLAPSE_ID)) throw badRequest(`collapse_id must be at most ${MAX_COLLAPSE_ID} characters`);
  if (body.ios_attachments !== undefined && (!isObject(body.ios_attachments) || Object.values(body.ios_attachments).some((url) => typeof url !== 'string'))) {
    throw badRequest('ios_attachments must be an object of ids to URLs');
  }
  for (const field of ['url', 'web_url', 'app_url']) {
    if (body[field] !== undefined && typeof body[field] !== 'string') throw badRequest(`${field} must be a string`);
  }
  if (body.web_url !== undefined && !/^https?:\/\//i.test(String(body.web_url))) throw badRequest('web_url must be an http(s) URL');
}


export class FakeOneSignal extends LocalHttpsFake {
  readonly appId: string;
  readonly restApiKey: string;
  /** Every request, in arrival order, with what was answered. */
  readonly requests: FakeOneSignalRequest[] = [];
  /** Every push handed to a subscription, in order. */
  readonly delivered: FakeOneSignalDelivery[] = [];
  /** Requests answered from the idempotency record (nothing delivered). */
  idempotentRepeats = 0;

  private readonly invalid = new Set<string>();
  /** The answer given to each idempotency key's first request. */
  private readonly byKey = new Map<string, { notificationId: string; answer: unknown }>();
  private readonly scripts: OneSignalAnswer[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(private readonly options: FakeOneSignalOptions) {
    super((res, error) => this.json(res, 500, { errors: [`fake-onesignal: ${error.message}`] }));
    this.appId = options.appId ?? randomUUID();
    this.restApiKey = options.restApiKey ?? `os_v2_app_${randomBytes(30).toString('base64url')}`;
  }

  static start(options: FakeOneSignalOptions = {}): Promise<FakeOneSignal> {
    return new FakeOneSignal(options).listen();
  }

  /** Makes these subscriptions unknown or unsubscribed: OneSignal lists them in errors.invalid_player_ids. */
  invalidate(...subscriptionIds: string[]): this {
    for (const id of subscriptionIds) this.invalid.add(id.toLowerCase());
    return this;
  }

  /** The next requests get these answers, one each, in order; then requests are served again. */
  script(...answers: OneSignalAnswer[]): this {
    this.scripts.push(...answers);
    return this;
  }

  /** The pushes handed to one subscription, in order. */
  deliveriesTo(subscriptionId: string): FakeOneSignalDelivery[] {
    return this.delivered.filter((delivery) => delivery.subscriptionId === subscriptionId.toLowerCase());
  }

  /** How many (push, subscription) pairs got the push more than once: what idempotent requests must keep at 0. */
  duplicates(): number {
    const seen = new Map<string, number>();
    for (const { pushId, notificationId, subscriptionId } of this.delivered) {
      const key = `${pushId ?? notificationId} ${subscriptionId}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    return [...seen.values()].filter((times) => times > 1).length;
  }

  /** Forgets requests, deliveries, scripts, invalid subscriptions, idempotency keys and peaks. */
  reset(): this {
    this.requests.length = 0;
    this.delivered.length = 0;
    this.scripts.length = 0;
    this.invalid.clear();
    this.byKey.clear();
    this.idempotentRepeats = 0;
    return this.resetPeaks();
  }

  /** Stops listening and cuts every connection; answers waiting out a delay are dropped. */
  override async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    await super.close();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.add(timer);
    });
  }

  protected async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    const socket = req.socket;
    const connection = this.opened(req, res);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const body: Record<string, any> = isObject(parsed) ? parsed : {};
    const entry: FakeOneSignalRequest = {
      at: Date.now(),
      method: req.method ?? '',
      url: req.url ?? '',
      authorization: req.headers.authorization,
      body,
      subscriptionIds: Array.isArray(body.include_subscription_ids) ? body.include_subscription_ids.filter((id: unknown): id is string => typeof id === 'string') : [],
      idempotencyKey: typeof (body.idempotency_key ?? body.external_id) === 'string' ? (body.idempotency_key ?? body.external_id) : undefined,
      unknownFields: Object.keys(body).filter((field) => !KNOWN_FIELDS.has(field)),
      status: 0,
      reason: '',
      notificationId: null,
      answeredBytes: 0,
      connection,
    };
    this.requests.push(entry);
    const scripted = this.scripts.shift();
    if (this.options.answerDelayMs) await this.sleep(this.options.answerDelayMs);
    if (scripted?.delayMs) await this.sleep(scripted.delayMs);
    if (scripted?.silent) {
      entry.reason = 'no answer';
      return;
    }
    if (scripted && !scripted.dropAfterAccept) {
      entry.status = scripted.status;
      entry.reason = 'scripted';
      if (scripted.bodyBytes !== undefined) return this.stream(res, scripted, entry);
      return this.json(res, scripted.status, scripted.body ?? { errors: [`scripted ${scripted.status}`] }, scripted.headers, entry);
    }

    let status: number;
    let answer: unknown;
    try {
      ({ status, answer } = this.create(req, body, parsed, entry));
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      entry.status = error.status;
      entry.reason = error.message;
      return this.json(res, error.status, { errors: [error.message] }, undefined, entry);
    }
    if (scripted?.dropAfterAccept) {
      entry.reason = `${entry.reason}, lost answer`;
      socket.destroy();
      return;
    }
    entry.status = status;
    this.json(res, status, answer, undefined, entry);
  }

  /** OneSignal's own handling of a create-notification request: checks, idempotency, delivery. */
  private create(req: IncomingMessage, body: Record<string, any>, parsed: unknown, entry: FakeOneSignalRequest): { status: number; answer: unknown } {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST' || path !== '/notifications') throw new Refusal(404, `fake-onesignal: no route for ${req.method} ${path}`);
    const credentials = /^(key|basic) (.+)$/i.exec(req.headers.authorization ?? '');
    if (!credentials || credentials[2] !== this.restApiKey) throw new Refusal(403, ONESIGNAL_ACCESS_DENIED);
    if (!/application\/json/i.test(req.headers['content-type'] ?? '') || !isObject(parsed) || typeof body.app_id !== 'string') {
      throw badRequest('app_id not found. You may be missing a Content-Type: application/json header.');
    }
    if (body.app_id !== this.appId) throw new Refusal(403, ONESIGNAL_ACCESS_DENIED);
    checkBody(body, this.options.maxSubscriptionsPerRequest ?? ONESIGNAL_MAX_SUBSCRIPTIONS);

    const key = entry.idempotencyKey?.toLowerCase();
    const known = key === undefined ? undefined : this.byKey.get(key);
    if (known) {
      this.idempotentRepeats += 1;
      entry.reason = 'idempotent repeat';
      entry.notificationId = known.notificationId;
      return { status: 200, answer: known.answer };
    }
    const ids = [...new Set(entry.subscriptionIds.map((id) => id.toLowerCase()))];
    const invalid = ids.filter((id) => this.invalid.has(id));
    const receiving = ids.filter((id) => !this.invalid.has(id));
    if (receiving.length === 0) {
      entry.reason = 'none subscribed';
      return { status: 200, answer: { id: '', external_id: null, errors: [ONESIGNAL_NONE_SUBSCRIBED] } };
    }
    const notificationId = randomUUID();
    entry.reason = 'created';
    entry.notificationId = notificationId;
    const pushId = isObject(body.data) && typeof body.data.push_id === 'string' ? body.data.push_id : undefined;
    for (const subscriptionId of receiving) this.delivered.push({ subscriptionId, notificationId, pushId, request: entry });
    const answer = { id: notificationId, external_id: null, ...(invalid.length ? { errors: { invalid_player_ids: invalid } } : {}) };
    if (key !== undefined) this.byKey.set(key, { notificationId, answer });
    return { status: 200, answer };
  }

  /** A body of scripted.bodyBytes, written as the client takes it, until it stops. */
  private stream(res: ServerResponse, scripted: OneSignalAnswer, entry: FakeOneSignalRequest): void {
    const total = scripted.bodyBytes ?? 0;
    let closed = false;
    res.once('close', () => (closed = true));
    res.on('error', () => undefined);
    res.writeHead(scripted.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': total, ...scripted.headers });
    const block = Buffer.alloc(Math.min(total, 64 * 1024), 'x');
    const pump = () => {
      while (!closed && entry.answeredBytes < total) {
        const chunk = block.subarray(0, Math.min(block.length, total - entry.answeredBytes));
        entry.answeredBytes += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!closed) res.end();
    };
    pump();
  }

  private json(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}, entry?: FakeOneSignalRequest): void {
    const text = JSON.stringify(payload);
    if (entry) entry.answeredBytes = Buffer.byteLength(text);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }
}
