import { errorReason, parseRetryAfter } from '@operator/config';
import { before, createOutbound, httpsOrigin, OutboundError, reasonFromBody, requestToken, sanitizeReason, type OutboundAnswer, type ProxySettings } from '@operator/egress';
import { cachedAccessToken, inFlightLimit, sendError, type Notification, type PushProvider, type SendError, type SendResult, type SendTarget } from '@operator/providers';
import { hmsSendBody, toHmsMessage, type HmsMessage } from './message';

// Huawei Push Kit (push server API v1) over @operator/egress. A send refused for its access token
// renews it and goes once more. No more requests in flight than connections, so that none waits in
// the agent's queue with its deadline running.

export interface HmsProviderOptions {
  /** The AppGallery Connect app's id (OAuth client id) and secret. */
  appId: string;
  appSecret: string;
  /** Takes every request instead of Huawei's hosts (HMS_ENDPOINT). */
  endpoint?: string;
  proxy?: ProxySettings;
  /** A local test server's CA. */
  ca?: string | Buffer;
  concurrency?: number;
  maxConnections?: number;
  timeoutMs?: number;
  /** The clock of the access token's lifetime (a test's). */
  now?: () => number;
}

export const HMS_OAUTH_ORIGIN = 'https://oauth-login.cloud.huawei.com';
export const HMS_PUSH_ORIGIN = 'https://push-api.cloud.huawei.com';
export const HMS_TOKEN_PATH = '/oauth2/v3/token';
export const HMS_MAX_TOKENS_PER_REQUEST = 1000;
export const DEFAULT_MAX_CONNECTIONS = 32;
const DEFAULT_TIMEOUT_MS = 15_000;
const TOKEN_RENEWAL_MS = 5 * 60_000;
/** A send's answer may be longer by its tokens: a partial success lists the refused ones. */
export const MAX_ANSWER_BYTES = 64 * 1024;

/** Push Kit's result codes that decide an outcome. */
export const HMS_CODE = {
  success: '80000000',
  partialSuccess: '80100000',
  parameterError: '80100001',
  syncNeedsOneToken: '80100002',
  structureError: '80100003',
  expiredTtl: '80100004',
  collapseKeyInvalid: '80100013',
  sensitiveContent: '80100016',
  oauthError: '80200001',
  oauthTokenExpired: '80200003',
  noPushPermission: '80300002',
  allTokensInvalid: '80300007',
  messageTooBig: '80300008',
  tooManyTokens: '80300010',
  noHighPriorityPermission: '80300011',
  internalError: '81000001',
} as const;

/** The message itself is refused: sending it again would not change that. */
const PAYLOAD_CODES = new Set<string>([
  HMS_CODE.parameterError,
  HMS_CODE.syncNeedsOneToken,
  HMS_CODE.structureError,
  HMS_CODE.expiredTtl,
  HMS_CODE.collapseKeyInvalid,
  HMS_CODE.sensitiveContent,
  HMS_CODE.tooManyTokens,
  // urgency HIGH needs a permission the app has not been given: this message, not the credential.
  HMS_CODE.noHighPriorityPermission,
]);
const TOKEN_REFUSED_CODES = new Set<string>([HMS_CODE.oauthError, HMS_CODE.oauthTokenExpired]);

export interface HmsAnswer {
  status: number;
  code?: string;
  msg?: string;
  requestId?: string;
  retryAfter?: string;
  truncated?: boolean;
  /** For answers that are not Push Kit's JSON. */
  body?: Buffer;
}

/** `tokenRefused`: the access token was refused (renew and send once more). */
export interface HmsOutcome {
  results: SendResult[];
  tokenRefused: boolean;
}

const pushKitCode = (value: unknown): string | undefined => (typeof value === 'string' && /^\d{1,12}$/.test(value) ? value : undefined);

export function readHmsAnswer(answer: OutboundAnswer): HmsAnswer {
  const header = answer.headers['retry-after'];
  const read: HmsAnswer = { status: answer.status, retryAfter: Array.isArray(header) ? header[0] : header, truncated: answer.truncated, body: answer.body };
  try {
    const json = JSON.parse(answer.body.toString('utf8')) as { code?: unknown; msg?: unknown; requestId?: unknown };
    read.code = pushKitCode(json?.code);
    if (typeof json?.msg === 'string') read.msg = json.msg;
    if (typeof json?.requestId === 'string' && /^[\x21-\x7e]{1,128}$/.test(json.requestId)) read.requestId = json.requestId;
  } catch {
    // Not JSON (a proxy's page), or cut at the cap: judged by its status.
  }
  return read;
}

/**
 * The tokens a partial success or an all-invalid answer names in its msg, itself JSON (v1's
 * illegal_tokens, or v3's illegalTokens by reason). Null when none can be read.
 */
export function illegalTokens(msg: string | undefined): Set<string> | null {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(msg ?? '');
  } catch {
    return null;
  }
  if (!parsed || typeof parsed !== 'object') return null;
  const listed = parsed.illegal_tokens ?? parsed.illegalTokens;
  const lists = Array.isArray(listed) ? [listed] : listed && typeof listed === 'object' ? Object.values(listed) : [];
  const tokens = lists.flatMap((list) => (Array.isArray(list) ? list.filter((token): token is string => typeof token === 'string') : []));
  return tokens.length ? new Set(tokens) : null;
}

/** What Push Kit said, as a short sanitised reason. */
function said(answer: HmsAnswer, note = ''): string {
  const msg = answer.msg && !/^\s*[[{]/.test(answer.msg) ? sanitizeReason(answer.msg) : '';
  if (answer.code) return `Push Kit ${answer.code} (HTTP ${answer.status}${note})${msg ? `: ${msg}` : ''}`;
  const reason = msg || (answer.body ? reasonFromBody(answer.body) : '');
  return `HTTP ${answer.status}${note}${answer.truncated ? ', answer cut' : ''}: ${reason || "not an answer of Push Kit's"}`;
}

/**
 * Every token's outcome, by Push Kit's code first, else the HTTP status. A partial success whose
 * refused tokens cannot be read counts them all sent, since sending again would repeat the push; a
 * 2xx that is not Push Kit's answer confirms nothing.
 */
export function hmsOutcome(answer: HmsAnswer, tokens: readonly string[]): HmsOutcome {
  const all = (error: SendError, tokenRefused = false): HmsOutcome => ({ results: tokens.map(() => ({ ok: false, error })), tokenRefused });
  const { status, code } = answer;
  const retryAfterMs = parseRetryAfter(answer.retryAfter);

  if (status === 503 || status === 429) return all(sendError('rate-limited', said(answer, ', traffic control'), retryAfterMs, 'credential'));
  if (code === HMS_CODE.success) return { results: tokens.map(() => ({ ok: true, providerMessageId: answer.requestId ?? null })), tokenRefused: false };
  if (code === HMS_CODE.partialSuccess) {
    const refused = illegalTokens(answer.msg);
    const dead = sendError('invalid-token', `Push Kit ${code}: the token is not valid for this app`);
    const results = tokens.map((token): SendResult => (refused?.has(token) ? { ok: false, error: dead } : { ok: true, providerMessageId: answer.requestId ?? null }));
    return { results, tokenRefused: false };
  }
  if (code === HMS_CODE.allTokensInvalid) return all(sendError('invalid-token', `Push Kit ${code}: the token is not valid for this app`));
  if ((code && TOKEN_REFUSED_CODES.has(code)) || status === 401) return all(sendError('auth', said(answer, ', access token refused')), true);
  if (code === HMS_CODE.noPushPermission) return all(sendError('auth', said(answer)));
  if (code === HMS_CODE.messageTooBig) return all(sendError('payload-too-large', said(answer)));
  if (code && PAYLOAD_CODES.has(code)) return all(sendError('payload-invalid', said(answer)));
  if (code === HMS_CODE.internalError) return all(sendError('unavailable', said(answer), retryAfterMs));

  const unknown = code ? ', unknown code' : '';
  if (status >= 500 || status === 408) return all(sendError('unavailable', said(answer, unknown), retryAfterMs));
  if (status === 403 || status === 404) return all(sendError('auth', said(answer, unknown)));
  if (status === 413) return all(sendError('payload-too-large', said(answer, unknown)));
  if (status >= 200 && status < 300 && !code) return all(sendError('unavailable', said(answer), retryAfterMs));
  return all(sendError('payload-invalid', said(answer, unknown)));
}

/** No answer: always transient. */
function transportError(error: unknown, what: string): SendError {
  if (!(error instanceof OutboundError)) return sendError('network', sanitizeReason(`${what}: ${errorReason(error)}`));
  return sendError('network', sanitizeReason(`${what}: ${error.failure === 'network' ? error.message : `${error.failure}: ${error.message}`}`));
}

class GrantFailure extends Error {
  constructor(readonly error: SendError) {
    super(error.message);
    this.name = 'GrantFailure';
  }
}

/** Huawei's OAuth error, its numbers and words kept. */
function oauthReason(status: number, json: Record<string, unknown>): string {
  const codes = [json.error, json.sub_error].filter((value) => typeof value === 'number' || typeof value === 'string').map((value) => sanitizeReason(String(value), 32));
  const description = typeof json.error_description === 'string' ? sanitizeReason(json.error_description) : '';
  const reason = [codes.join('/'), description].filter(Boolean).join(' ');
  return reason ? `HTTP ${status}: ${reason}` : `HTTP ${status}: not an answer of Huawei's OAuth server`;
}

export function createHmsProvider(options: HmsProviderOptions): PushProvider {
  const endpoint = options.endpoint ? httpsOrigin(options.endpoint, 'HMS_ENDPOINT') : null;
  const tokenUrl = `${endpoint ?? HMS_OAUTH_ORIGIN}${HMS_TOKEN_PATH}`;
  const sendUrl = `${endpoint ?? HMS_PUSH_ORIGIN}/v1/${encodeURIComponent(options.appId)}/messages:send`;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxConnections = Math.max(1, Math.floor(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS));
  const now = options.now ?? Date.now;
  const outbound = createOutbound({ proxy: options.proxy, ca: options.ca, connectionsPerOrigin: maxConnections });
  const limit = inFlightLimit(Math.min(options.concurrency ?? maxConnections, maxConnections));
  let closed = false;

  async function grant(): Promise<{ value: string; lifetimeMs: number }> {
    let answer: OutboundAnswer;
    let json: Record<string, unknown>;
    try {
      ({ answer, json } = await requestToken(
        outbound,
        tokenUrl,
        { grant_type: 'client_credentials', client_id: options.appId, client_secret: options.appSecret },
        { timeoutMs, maxBodyBytes: MAX_ANSWER_BYTES },
      ));
    } catch (error) {
      throw new GrantFailure(transportError(error, 'token request failed'));
    }
    const lifetime = Number(json.expires_in);
    if (answer.status === 200 && typeof json.access_token === 'string' && /^[\x21-\x7e]+$/.test(json.access_token) && lifetime > 0) {
      return { value: json.access_token, lifetimeMs: lifetime * 1000 };
    }
    const reason = `token request answered ${oauthReason(answer.status, json)}`;
    const retryAfterMs = parseRetryAfter(answer.headers['retry-after']);
    // Its rate limit is about this app's credential: every send with it waits for the same token.
    if (answer.status === 429) throw new GrantFailure(sendError('rate-limited', reason, retryAfterMs, 'credential'));
    if (answer.status >= 500 || answer.status === 408 || answer.status === 200) throw new GrantFailure(sendError('unavailable', reason, retryAfterMs));
    throw new GrantFailure(sendError('auth', reason));
  }

  const accessToken = cachedAccessToken(grant, { renewBeforeMs: TOKEN_RENEWAL_MS, now });

  function sendRequest(message: HmsMessage, tokens: string[]): Promise<SendResult[]> {
    const body = hmsSendBody(message, tokens);
    const maxBodyBytes = MAX_ANSWER_BYTES + tokens.reduce((bytes, token) => bytes + Buffer.byteLength(token) + 8, 0);
    const failAll = (error: SendError): SendResult[] => tokens.map(() => ({ ok: false, error }));
    return limit(async () => {
      // One deadline for the whole request, a renewal and its second try included.
      const deadline = Date.now() + timeoutMs;
      for (let renewed = false; ; renewed = true) {
        let bearer: string;
        try {
          // The grant goes on for the other sends waiting on it; this one stops at its deadline.
          bearer = await before(accessToken.get(), deadline - Date.now(), () => new GrantFailure(sendError('network', `no access token within ${timeoutMs} ms`)));
        } catch (error) {
          return failAll(error instanceof GrantFailure ? error.error : sendError('network', sanitizeReason(errorReason(error))));
        }
        let answer: OutboundAnswer;
        try {
          answer = await outbound.request({
            url: sendUrl,
            method: 'POST',
            headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json; charset=UTF-8', accept: 'application/json' },
            body,
            timeoutMs: Math.max(1, deadline - Date.now()),
            maxBodyBytes,
          });
        } catch (error) {
          return failAll(transportError(error, 'no answer from Push Kit'));
        }
        const outcome = hmsOutcome(readHmsAnswer(answer), tokens);
        if (!outcome.tokenRefused || renewed || Date.now() >= deadline) return outcome.results;
        accessToken.refused(bearer);
      }
    });
  }

  return {
    name: 'hms',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('HMS provider is closed');
      const results: SendResult[] = new Array(targets.length);
      // A token listed twice goes once; each of its targets gets its outcome.
      const targetsOf = new Map<string, number[]>();
      targets.forEach((target, index) => {
        const token = target.token?.trim();
        // An empty token never reaches Push Kit: it would refuse the whole request for it.
        if (!token) results[index] = { ok: false, error: sendError('invalid-token', 'empty HMS push token') };
        else targetsOf.set(token, [...(targetsOf.get(token) ?? []), index]);
      });
      const tokens = [...targetsOf.keys()];
      if (tokens.length === 0) return results;
      const message = toHmsMessage(notification);
      const batches: string[][] = [];
      for (let start = 0; start < tokens.length; start += HMS_MAX_TOKENS_PER_REQUEST) batches.push(tokens.slice(start, start + HMS_MAX_TOKENS_PER_REQUEST));
      await Promise.all(
        batches.map(async (batch) => {
          const outcomes = await sendRequest(message, batch);
          batch.forEach((token, at) => {
            for (const index of targetsOf.get(token) ?? []) results[index] = outcomes[at];
          });
        }),
      );
      return results;
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await outbound.close();
    },
  };
}
