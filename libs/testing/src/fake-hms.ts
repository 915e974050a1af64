import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LocalHttpsFake, readBody, sleep } from './fake-server';

// A local Huawei Push Kit over TLS, both of Huawei's hosts on one origin (what HMS_ENDPOINT names):
// POST /oauth2/v3/token grants client-credentials tokens; POST /v1/{appId}/messages:send checks the
// bearer token and the message as Push Kit does and answers its {code, msg, requestId}. The HTTP
// statuses of the codes are the fake's reading of Huawei's tables; the provider decides by code.

/** A scripted answer to one send (or, with answerGrants(), to token grants). */
export interface HmsScript {
  status: number;
  /** A JSON body as given; default {code, msg, requestId} from `code` and `msg`. */
  body?: unknown;
  code?: string;
  msg?: string;
  headers?: Record<string, string>;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Cut the connection instead of answering. */
  hangUp?: boolean;
  /** Never answer (the connection stays open until the client gives up). */
  silent?: boolean;
  /** The body exactly as given, as text/html (a proxy's page). */
  text?: string;
  /** A body of this many bytes (`text` repeated, or `x`), written as fast as the client takes it. */
  bodyBytes?: number;
}

/** Answers as Push Kit gives them. */
export const hmsAnswer = {
  error: (status: number, code: string, msg: string, headers?: Record<string, string>): HmsScript => ({ status, code, msg, headers }),
  /** HTTP 503: Push Kit's traffic control (flow control) for the app; Retry-After when given. Huawei documents the status, no code for it. */
  trafficControl: (retryAfterSeconds?: number): HmsScript => ({
    status: 503,
    msg: 'Traffic control',
    headers: retryAfterSeconds === undefined ? undefined : { 'Retry-After': String(retryAfterSeconds) },
  }),
  /** 81000001 with HTTP 500: Push Kit's internal error. */
  internalError: (): HmsScript => ({ status: 500, code: '81000001', msg: 'System internal error' }),
  /** 80300002 with HTTP 403: the app may not send push messages (Push Kit not enabled for it). */
  noPermission: (): HmsScript => ({ status: 403, code: '80300002', msg: 'The current app does not have the permission to send push messages' }),
  /** The connection is cut before an answer. */
  hangUp: (): HmsScript => ({ status: 0, hangUp: true }),
  /** No answer at all. */
  silent: (): HmsScript => ({ status: 0, silent: true }),
};

/** One POST to messages:send, whatever was answered. */
export interface FakeHmsSend {
  appId: string;
  /** message.token as sent (empty when it was not a list). */
  tokens: string[];
  /** The `message` as received, its token list left out. */
  message: Record<string, any>;
  validateOnly: boolean;
  authorization: string | undefined;
  contentType: string | undefined;
  status: number;
  /** Push Kit's code answered ('' for a raw or no answer). */
  code: string;
  /** Why it was answered so: 'sent', 'scripted', or the refusal. */
  reason: string;
  requestId: string | null;
  at: number;
  /** Bytes of answer body written to the client. */
  answeredBytes: number;
  /** The client closed the request before the answer was complete. */
  cancelled: boolean;
}

/** One token delivered: Push Kit took the message for it. */
export interface FakeHmsDelivery {
  token: string;
  /** The message as received, its token list left out. */
  message: Record<string, any>;
  requestId: string;
  at: number;
}

/** One POST to /oauth2/v3/token. */
export interface FakeHmsGrant {
  status: number;
  clientId: string | null;
  reason: string;
  accessToken: string | null;
  answeredBytes?: number;
}

export interface FakeHmsOptions {
  appId?: string;
  appSecret?: string;
  /** Lifetime of issued access tokens, in seconds (Huawei: 3600). */
  tokenLifetimeSeconds?: number;
  /** Every send is answered this long after it arrived (a script's delayMs adds to it). */
  answerDelayMs?: number;
  /** Tokens Push Kit refuses as illegal (not of this app, malformed, gone). */
  invalidTokens?: Iterable<string>;
  /** Or a rule for them. */
  isInvalidToken?: (token: string) => boolean;
  /** The message size Push Kit takes, its tokens left out (4096 bytes). */
  maxMessageBytes?: number;
}

export const HMS_FAKE_MAX_TOKENS = 1000;
const HMS_MAX_TTL_SECONDS = 15 * 24 * 3600;

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
const structure = (what: string) => new Refusal(400, '80100003', `Incorrect message structure: ${what}`);
const parameter = (what: string) => new Refusal(400, '80100001', `Some request parameters are incorrect: ${what}`);

const isObject = (value: unknown): value is Record<string, any> => !!value && typeof value === 'object' && !Array.isArray(value);
const optionalString = (value: unknown, what: string) => {
  if (value !== undefined && typeof value !== 'string') throw structure(`${what} must be a string`);
};
const optionalStrings = (value: unknown, what: string) => {
  if (value !== undefined && (!Array.isArray(value) || value.some((item) => typeof item !== 'string'))) throw structure(`${what} must be an array of strings`);
};

/** What Push Kit checks of `message` before sending it (the parts a client can get wrong). */
function checkMessage(message: Record<string, any>, maxMessageBytes: number): string[] {
  const targets = ['token', 'topic', 'condition'].filter((key) => message[key] !== undefined);
  if (targets.length !== 1) throw structure('exactly one of token, topic or condition must be set');
  if (!Array.isArray(message.token)) throw structure('token must be an array');
  const tokens = message.token as unknown[];
  if (tokens.length === 0 || tokens.length > HMS_FAKE_MAX_TOKENS) {
    throw new Refusal(400, '80300010', `The number of tokens in the message body exceeds the default value (${tokens.length})`);
  }
  if (tokens.some((token) => typeof token !== 'string' || token.trim() === '')) throw parameter('token');
  optionalString(message.data, 'message.data');
  const android = message.android;
  if (android !== undefined && !isObject(android)) throw structure('message.android must be an object');
  if (android) {
    const key = android.collapse_key;
    if (key !== undefined && (!Number.isInteger(key) || key < -1 || key > 100)) throw parameter('collapse_key must be an integer from -1 to 100');
    if (android.urgency !== undefined && android.urgency !== 'HIGH' && android.urgency !== 'NORMAL') throw parameter('urgency must be HIGH or NORMAL');
    if (android.ttl !== undefined) {
      const ttl = /^(\d+)(\.\d{1,9})?s$/.exec(String(android.ttl));
      if (!ttl) throw parameter('ttl must be a duration such as 86400s');
      if (Number(ttl[1]) > HMS_MAX_TTL_SECONDS) throw parameter('ttl is longer than 15 days');
    }
    optionalString(android.data, 'message.android.data');
    const note = android.notification;
    if (note !== undefined && !isObject(note)) throw structure('message.android.notification must be an object');
    if (note) {
      for (const field of ['title', 'body', 'image', 'icon', 'color', 'sound', 'tag', 'channel_id', 'body_loc_key', 'title_loc_key']) {
        optionalString(note[field], `message.android.notification.${field}`);
      }
      optionalStrings(note.body_loc_args, 'message.android.notification.body_loc_args');
      optionalStrings(note.title_loc_args, 'message.android.notification.title_loc_args');
      if (!note.title && !message.notification?.title) throw parameter('title is required');
      if (note.color !== undefined && !/^#[0-9a-fA-F]{6}$/.test(note.color)) throw parameter('color must be #RRGGBB');
      if (note.image !== undefined && !/^https:\/\//i.test(note.image)) throw parameter('image must be an https URL');
      if (note.icon !== undefined && !/^\/raw\/[^/]+$/.test(note.icon)) throw parameter('icon must be /raw/<name>');
      if (note.sound !== undefined && !/^\/raw\/[^/]+$/.test(note.sound)) throw parameter('sound must be /raw/<name>');
      if (note.default_sound !== undefined && typeof note.default_sound !== 'boolean') throw structure('default_sound must be a boolean');
      const click = note.click_action;
      if (!isObject(click)) throw parameter('click_action is required for an Android notification');
      if (click.type === 1 && !click.intent && !click.action) throw parameter('click_action type 1 needs an intent or an action');
      else if (click.type === 2 && !/^https:\/\//i.test(String(click.url ?? ''))) throw parameter('click_action type 2 needs an https url');
      else if (![1, 2, 3, 4].includes(click.type)) throw parameter('click_action type must be 1 to 4');
    }
  }
  const { token: _tokens, ...withoutTokens } = message;
  if (Buffer.byteLength(JSON.stringify(withoutTokens)) > maxMessageBytes) {
    throw new Refusal(400, '80300008', 'The message body size exceeds the default value');
  }
  return tokens as string[];
}



export class FakeHms extends LocalHttpsFake {
  readonly appId: string;
  readonly appSecret: string;
  /** Every messages:send request, in arrival order, with what was answered. */
  readonly requests: FakeHmsSend[] = [];
  /** Every token Push Kit took a message for, in order. */
  readonly delivered: FakeHmsDelivery[] = [];
  /** Every /oauth2/v3/token request. */
  readonly tokenGrants: FakeHmsGrant[] = [];
  /** Tokens refused as illegal (add to it at will). */
  readonly invalidTokens: Set<string>;
  isInvalidToken: ((token: string) => boolean) | null;

  /** Issued access tokens and when they expire (ms since epoch). */
  private readonly accessTokens = new Map<string, number>();
  private readonly scripts: HmsScript[] = [];
  private grantAnswer: HmsScript | null = null;
  private sent = 0;

  private constructor(private readonly options: FakeHmsOptions) {
    super((res, error) => this.json(res, 500, { code: '81000001', msg: `fake-hms: ${error.message}` }));
    this.appId = options.appId ?? String(100_000_000 + (randomBytes(4).readUInt32BE() % 900_000_000));
    this.appSecret = options.appSecret ?? randomBytes(32).toString('hex');
    this.invalidTokens = new Set(options.invalidTokens ?? []);
    this.isInvalidToken = options.isInvalidToken ?? null;
  }

  static start(options: FakeHmsOptions = {}): Promise<FakeHms> {
    return new FakeHms(options).listen();
  }

  /** Access tokens granted so far. */
  get grants(): number {
    return this.tokenGrants.filter((grant) => grant.accessToken !== null).length;
  }

  /** The deliveries to one token. */
  deliveriesTo(token: string): FakeHmsDelivery[] {
    return this.delivered.filter((delivery) => delivery.token === token);
  }

  /** The next sends (one each, in arrival order, once their access token is accepted) get these answers. */
  answerNext(...answers: HmsScript[]): this {
    this.scripts.push(...answers);
    return this;
  }

  /** Every token grant gets this answer instead (a page, a 503, a huge body); null: grant again. */
  answerGrants(answer: HmsScript | null): this {
    this.grantAnswer = answer;
    return this;
  }

  /** Every access token issued so far expires now: sends with them get 80200003 (HTTP 401). */
  expireTokens(): this {
    for (const token of this.accessTokens.keys()) this.accessTokens.set(token, 0);
    return this;
  }

  /** Clears logs and scripts (issued access tokens stay valid). */
  reset(): this {
    this.requests.length = 0;
    this.delivered.length = 0;
    this.tokenGrants.length = 0;
    this.scripts.length = 0;
    this.grantAnswer = null;
    return this;
  }

  protected async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'POST' && path === '/oauth2/v3/token') return this.grant(req, body, res);
    const send = path.match(/^\/v1\/([^/]+)\/messages:send$/);
    if (req.method === 'POST' && send) return this.send(decodeURIComponent(send[1]), req, body, res);
    this.json(res, 404, { code: '80100003', msg: `fake-hms: no route for ${req.method} ${path}` });
  }

  private grant(req: IncomingMessage, body: string, res: ServerResponse): void {
    if (this.grantAnswer) {
      const entry: FakeHmsGrant = { status: this.grantAnswer.status, clientId: null, reason: 'scripted', accessToken: null, answeredBytes: 0 };
      this.tokenGrants.push(entry);
      return this.scripted(req, res, this.grantAnswer, entry);
    }
    const form = new URLSearchParams(body);
    const clientId = form.get('client_id');
    const refuse = (status: number, error: number, subError: number, description: string) => {
      this.tokenGrants.push({ status, clientId, reason: description, accessToken: null });
      this.json(res, status, { error, sub_error: subError, error_description: description });
    };
    if (!/^application\/x-www-form-urlencoded/.test(req.headers['content-type'] ?? '')) return refuse(400, 1102, 20001, 'invalid content type');
    if (form.get('grant_type') !== 'client_credentials') return refuse(400, 1102, 20001, 'unsupported grant_type');
    if (!clientId || !form.get('client_secret')) return refuse(400, 1102, 20001, 'missing required parameter');
    if (clientId !== this.appId || form.get('client_secret') !== this.appSecret) return refuse(400, 1101, 20003, 'invalid client');
    // Huawei's tokens are base64 and carry '/', '+' and '='.
    const accessToken = `CF3X${randomBytes(48).toString('base64')}`;
    const lifetime = this.options.tokenLifetimeSeconds ?? 3600;
    this.accessTokens.set(accessToken, Date.now() + lifetime * 1000);
    this.tokenGrants.push({ status: 200, clientId, reason: 'granted', accessToken });
    this.json(res, 200, { access_token: accessToken, expires_in: lifetime, token_type: 'Bearer' });
  }

  private async send(appId: string, req: IncomingMessage, body: string, res: ServerResponse): Promise<void> {
    let parsed: any;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    const raw: Record<string, any> = isObject(parsed?.message) ? parsed.message : {};
    const { token: listed, ...message } = raw;
    const entry: FakeHmsSend = {
      appId,
      tokens: Array.isArray(listed) ? listed.filter((token): token is string => typeof token === 'string') : [],
      message,
      validateOnly: parsed?.validate_only === true,
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      status: 0,
      code: '',
      reason: '',
      requestId: null,
      at: Date.now(),
      answeredBytes: 0,
      cancelled: false,
    };
    this.requests.push(entry);
    this.opened(req, res);
    res.once('close', () => {
      entry.cancelled = !res.writableFinished;
    });
    if (this.options.answerDelayMs) await sleep(this.options.answerDelayMs);
    const requestId = `${Date.now()}${String(++this.sent).padStart(6, '0')}`;
    const answer = (status: number, code: string, msg: string, reason: string, headers?: Record<string, string>) => {
      Object.assign(entry, { status, code, reason, requestId });
      this.json(res, status, { code, msg, requestId }, headers);
    };

    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const expiresAt = bearer === undefined ? undefined : this.accessTokens.get(bearer);
    if (expiresAt === undefined || appId !== this.appId) return answer(401, '80200001', 'Oauth authentication error', 'no valid access token');
    if (expiresAt <= Date.now()) return answer(401, '80200003', 'Oauth Token expired', 'access token expired');

    const script = this.scripts.shift();
    if (script) {
      Object.assign(entry, { status: script.status, code: script.code ?? '', reason: 'scripted' });
      return this.scripted(req, res, script, entry, requestId);
    }

    try {
      if (!isObject(parsed) || !isObject(parsed.message)) throw structure('the body must be {"message": {...}}');
      if (parsed.validate_only !== undefined && typeof parsed.validate_only !== 'boolean') throw structure('validate_only must be a boolean');
      checkMessage(parsed.message, this.options.maxMessageBytes ?? 4096);
    } catch (err) {
      if (err instanceof Refusal) return answer(err.status, err.code, err.message, err.message);
      throw err;
    }

    const illegal = entry.tokens.filter((token) => this.invalidTokens.has(token) || this.isInvalidToken?.(token));
    const taken = entry.tokens.filter((token) => !illegal.includes(token));
    if (!entry.validateOnly) {
      for (const token of taken) this.delivered.push({ token, message, requestId, at: Date.now() });
    }
    const counts = JSON.stringify({ success: taken.length, failure: illegal.length, illegal_tokens: illegal });
    if (taken.length === 0) return answer(400, '80300007', counts, 'all tokens invalid');
    if (illegal.length > 0) return answer(200, '80100000', counts, 'partly sent');
    answer(200, '80000000', 'Success', 'sent');
  }

  /** A scripted answer: Push Kit's JSON, a page, a huge body, a cut connection, or none. */
  private scripted(req: IncomingMessage, res: ServerResponse, script: HmsScript, entry: { answeredBytes?: number; requestId?: string | null }, requestId = ''): void {
    const finish = async () => {
      if (script.delayMs) await sleep(script.delayMs);
      if (script.silent) return;
      if (script.hangUp) return void req.socket.destroy();
      if (script.text === undefined && script.bodyBytes === undefined) {
        if (requestId && 'requestId' in entry) entry.requestId = requestId;
        return this.json(res, script.status, script.body ?? { code: script.code ?? '', msg: script.msg ?? '', requestId }, script.headers);
      }
      const text = Buffer.from(script.text ?? 'x');
      const total = script.bodyBytes ?? text.length;
      const named = Object.fromEntries(Object.entries(script.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
      res.writeHead(script.status, { 'content-type': 'text/html; charset=UTF-8', 'content-length': total, ...named });
      let closed = false;
      res.once('close', () => (closed = true));
      res.on('error', () => undefined);
      const block = Buffer.alloc(Math.min(total, 64 * 1024), text);
      let written = 0;
      const pump = () => {
        while (!closed && written < total) {
          const chunk = block.subarray(0, Math.min(block.length, total - written));
          written += chunk.length;
          entry.answeredBytes = written;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!closed) res.end();
      };
      pump();
    };
    void finish();
  }

  private json(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
    if (res.destroyed) return;
    const text = JSON.stringify(payload);
    res.writeHead(status, { 'content-type': 'application/json;charset=UTF-8', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }
}
