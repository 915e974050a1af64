import pLimit from 'p-limit';
import { generateRequestDetails, type PushSubscription, type RequestOptions } from 'web-push';
import { errorReason, matchAllowedOrigin, parseRetryAfter, type AllowedOrigin } from '@operator/config';
import { answerReason, createOutbound, OutboundError, sanitizeReason, type OutboundAnswer, type ProxySettings } from '@operator/egress';
import { sendError, webNotification, type Notification, type PushProvider, type SendError, type SendResult, type SendTarget } from '@operator/providers';
import { CREDENTIALS_REFUSED_AFTER, CREDENTIALS_REFUSED_WINDOW_MS, PushServiceMemory } from './push-services';

// A Web Push endpoint is whatever a browser, or someone posing as one, said: every send treats it as
// hostile. web-push signs and encrypts; @operator/egress sends, within its guards.

export interface WebPushProviderOptions {
  /** Base64url keys, as web-push generateVAPIDKeys() makes them, and a mailto: or https: subject. */
  vapid: { publicKey: string; privateKey: string; subject: string };
  /** An endpoint outside them fails without a connection. */
  allowedOrigins: readonly AllowedOrigin[];
  egress?: ProxySettings;
  /** A local test push service's CA; the system roots otherwise. */
  ca?: string | Buffer | (string | Buffer)[];
  /** Default 86400. */
  ttlSeconds?: number;
  /** The whole request, connecting through the proxy included. Default 10000. */
  timeoutMs?: number;
  /** Requests in flight within one send(). Default 16. */
  concurrency?: number;
  /** One request each; a send's deadline starts once it has one. Default 100. */
  connectionsPerOrigin?: number;
  retryAfterMaxMs?: number;
}

/** RFC 8291's 4096-byte body less the aes128gcm header (86), tag (16) and padding delimiter (1). */
export const MAX_WEB_PUSH_PLAINTEXT_BYTES = 3993;

/** Enough for an error's JSON, nothing a hostile endpoint could fill memory with. */
export const MAX_ANSWER_BYTES = 4096;

const DEFAULT_TTL_SECONDS = 86_400;
const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_CONCURRENCY = 16;
export const DEFAULT_CONNECTIONS_PER_ORIGIN = 100;
const DEFAULT_RETRY_AFTER_MAX_MS = 300_000;
/** A Location longer than this, or not printable, is no message id we store. */
const MAX_MESSAGE_ID_LENGTH = 1024;

/** What a service worker passes to `showNotification(title, options)`; push_id for open/click reports. */
export function webPushPayload(notification: Notification): string {
  const { title, options } = webNotification(notification.request, notification.pushId, notification.trackingToken);
  return JSON.stringify({ title, options, push_id: notification.pushId, ...(notification.trackingToken ? { tracking_token: notification.trackingToken } : {}) });
}

export function createWebPushProvider(options: WebPushProviderOptions): PushProvider {
  const connectionsPerOrigin = Math.max(1, Math.floor(options.connectionsPerOrigin ?? DEFAULT_CONNECTIONS_PER_ORIGIN));
  const outbound = createOutbound({ proxy: options.egress, ca: options.ca, connectionsPerOrigin });
  const perOrigin = originLimits(connectionsPerOrigin);
  const requestOptions: RequestOptions = {
    vapidDetails: options.vapid,
    TTL: options.ttlSeconds ?? DEFAULT_TTL_SECONDS,
    contentEncoding: 'aes128gcm',
    urgency: 'normal',
  };
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY));
  const retryAfterMaxMs = Math.max(0, options.retryAfterMaxMs ?? DEFAULT_RETRY_AFTER_MAX_MS);
  const services = new PushServiceMemory();
  let closed = false;

  const cap = (ms: number | undefined) => (ms === undefined ? undefined : Math.min(ms, retryAfterMaxMs));

  async function sendOne(payload: string, target: SendTarget): Promise<SendResult> {
    const subscription = subscriptionOf(target);
    if (typeof subscription === 'string') return { ok: false, error: sendError('invalid-token', subscription) };
    const allowed = matchAllowedOrigin(subscription.endpoint, options.allowedOrigins);
    if (!allowed.ok) return { ok: false, error: sendError('origin-not-allowed', `endpoint ${allowed.reason}`) };
    const origin = new URL(subscription.endpoint).origin;
    return perOrigin(origin, () => post(payload, subscription, origin, allowed.origin.privateAllowed));
  }

  async function post(payload: string, subscription: PushSubscription, origin: string, privateAllowed: boolean): Promise<SendResult> {
    // Looked at once the send's turn has come: the origin may have been paused while it waited.
    const pause = services.paused(origin, Date.now());
    if (pause) {
      const message = `push service ${origin} paused for ${Math.ceil(pause.remainingMs / 1000)} s after ${pause.reason}`;
      return { ok: false, error: sendError('unavailable', message, pause.remainingMs, 'origin') };
    }
    let details: ReturnType<typeof generateRequestDetails>;
    try {
      details = generateRequestDetails(subscription, payload, requestOptions);
    } catch (error) {
      // Keys of the right length that are no point on P-256: the subscription can never be sent to.
      return { ok: false, error: sendError('invalid-token', `subscription keys refused: ${sanitizeReason(errorReason(error))}`) };
    }

    let answer: OutboundAnswer;
    try {
      answer = await outbound.request({
        url: subscription.endpoint,
        method: 'POST',
        headers: Object.fromEntries(Object.entries(details.headers).map(([name, value]) => [name, String(value)])),
        body: details.body ?? undefined,
        timeoutMs,
        maxBodyBytes: MAX_ANSWER_BYTES,
        publicOnly: !privateAllowed,
        // Taken once the push service says so: a 201 whose body then trickles is not a failure to send again.
        successWithoutBody: true,
      });
    } catch (error) {
      return { ok: false, error: transportError(error) };
    }
    return outcomeOf(origin, subscription.endpoint, answer);
  }

  function outcomeOf(origin: string, endpoint: string, answer: OutboundAnswer): SendResult {
    const { status, headers, body } = answer;
    if (status >= 200 && status < 300) {
      services.succeeded(origin);
      return { ok: true, providerMessageId: messageIdOf(headers.location) };
    }
    const reason = answerReason(status, body);
    const retryAfterMs = cap(parseRetryAfter(headers['retry-after']));
    if (status === 404 || status === 410) return { ok: false, error: sendError('unregistered', reason) };
    if (status === 429) return { ok: false, error: sendError('rate-limited', reason, retryAfterMs, 'device') };
    if (status === 401 || status === 403) return { ok: false, error: refusal(origin, endpoint, reason) };
    if (status === 413) return { ok: false, error: sendError('payload-too-large', reason) };
    // A 503, or a Retry-After on any 5xx (RFC 9110 10.2.3), pauses the whole origin; a bare 500, 502
    // or 504 may be one request's misfortune, so only this delivery waits.
    if (status === 503 || (status >= 500 && retryAfterMs !== undefined)) {
      if (retryAfterMs !== undefined) services.pause(origin, retryAfterMs, `HTTP ${status}`, Date.now());
      return { ok: false, error: sendError('unavailable', reason, retryAfterMs, 'origin') };
    }
    if (status === 408 || status >= 500) return { ok: false, error: sendError('unavailable', reason, retryAfterMs) };
    // A redirect is an answer, not an instruction: nothing is sent where it points.
    if (status >= 300 && status < 400) return { ok: false, error: sendError('payload-invalid', `${reason} (redirects are not followed)`) };
    if (status >= 400) return { ok: false, error: sendError('payload-invalid', reason) };
    return { ok: false, error: sendError('unavailable', reason, retryAfterMs) };
  }

  /**
   * A 401 or 403 is about the subscription: this delivery fails, the device stays. Several distinct
   * subscriptions of one origin refusing us with no success meanwhile is our credentials: `auth`.
   */
  function refusal(origin: string, endpoint: string, reason: string): SendError {
    const refusals = services.refused(origin, endpoint, Date.now());
    if (refusals < CREDENTIALS_REFUSED_AFTER) return sendError('subscription-refused', reason);
    const minutes = CREDENTIALS_REFUSED_WINDOW_MS / 60_000;
    return sendError('auth', `push service ${origin} refused ${refusals} subscriptions within ${minutes} min and took none: ${reason}`);
  }

  return {
    name: 'webpush',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('web push provider is closed');
      const payload = webPushPayload(notification);
      const size = Buffer.byteLength(payload);
      if (size > MAX_WEB_PUSH_PLAINTEXT_BYTES) {
        const error = sendError('payload-too-large', `payload of ${size} bytes is over the ${MAX_WEB_PUSH_PLAINTEXT_BYTES} a push service must accept`);
        return targets.map(() => ({ ok: false, error }));
      }
      const limited = pLimit(concurrency);
      return Promise.all(targets.map((target) => limited(() => sendOne(payload, target))));
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await outbound.close();
    },
  };
}

/** The browser's PushSubscription for a target, or why it cannot be one (a dead token). */
function subscriptionOf(target: SendTarget): PushSubscription | string {
  if (!target.p256dh || !target.auth) return 'subscription has no p256dh/auth keys';
  let url: URL;
  try {
    url = new URL(target.token);
  } catch {
    return 'endpoint is not a URL';
  }
  if (url.protocol !== 'https:') return `endpoint is not https (${url.protocol})`;
  const p256dh = Buffer.from(target.p256dh, 'base64url');
  if (p256dh.length !== 65 || p256dh[0] !== 0x04) return 'p256dh is not a 65-byte uncompressed P-256 key';
  if (Buffer.from(target.auth, 'base64url').length < 16) return 'auth secret is shorter than 16 bytes';
  return { endpoint: target.token, keys: { p256dh: target.p256dh, auth: target.auth } };
}

/** The Location of the message resource (RFC 8030 5), when it is a plain URL of sane length. */
function messageIdOf(location: string | string[] | undefined): string | null {
  const value = Array.isArray(location) ? location[0] : location;
  if (!value || value.length > MAX_MESSAGE_ID_LENGTH || !/^https?:\/\/[\x21-\x7e]+$/.test(value)) return null;
  return value;
}

/** No answer. A non-public address is final for this delivery (retrying resolves to it again); the rest is transient. */
function transportError(error: unknown): SendError {
  if (!(error instanceof OutboundError)) return sendError('network', sanitizeReason(errorReason(error)));
  if (error.failure === 'refused-address') return sendError('address-refused', `refused: ${sanitizeReason(error.message)}`);
  return sendError('network', sanitizeReason(error.failure === 'network' ? error.message : `${error.failure}: ${error.message}`));
}

/** As many requests per origin as there are connections, so none waits in undici's queue with its deadline running. */
function originLimits(limit: number) {
  const origins = new Map<string, pLimit.Limit>();
  return async <T>(origin: string, task: () => Promise<T>): Promise<T> => {
    let limited = origins.get(origin);
    if (!limited) origins.set(origin, (limited = pLimit(limit)));
    try {
      return await limited(task);
    } finally {
      if (limited.activeCount === 0 && limited.pendingCount === 0) origins.delete(origin);
    }
  };
}
