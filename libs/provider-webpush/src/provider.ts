import https from 'node:https';
import { sendNotification, type PushSubscription, type RequestOptions } from 'web-push';
import { parseRetryAfter } from '@operator/config';
import { sendError, webNotification, type Notification, type PushProvider, type SendResult, type SendTarget } from '@operator/providers';

export interface WebPushProviderOptions {
  /** The VAPID key pair (base64url, as web-push generateVAPIDKeys() makes it) and a mailto: or https: subject. */
  vapid: { publicKey: string; privateKey: string; subject: string };
  /** The https.Agent for every request (keep-alive); made by the provider when absent. Destroyed by close() either way. */
  agent?: https.Agent;
  /** How long the push service keeps an undelivered message, in seconds. Default 86400 (one day). */
  ttlSeconds?: number;
  /** Socket timeout of one request, in milliseconds. Default 10000. */
  timeoutMs?: number;
  /** Requests in flight at once within one send(). Default 16. */
  concurrency?: number;
}

/**
 * RFC 8291: a push service need not accept more than 4096 bytes of body; the aes128gcm header
 * (86 bytes with the sender key), the tag (16) and the padding delimiter (1) leave 3993 bytes of plaintext.
 */
export const MAX_WEB_PUSH_PLAINTEXT_BYTES = 3993;

const DEFAULT_TTL_SECONDS = 86_400;
const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_CONCURRENCY = 16;

/** The JSON a service worker receives: `self.registration.showNotification(title, options)`; push_id for open/click reports. */
export function webPushPayload(notification: Notification): string {
  const { title, options } = webNotification(notification.request, notification.pushId, notification.trackingToken);
  return JSON.stringify({ title, options, push_id: notification.pushId, ...(notification.trackingToken ? { tracking_token: notification.trackingToken } : {}) });
}

export function createWebPushProvider(options: WebPushProviderOptions): PushProvider {
  const agent = options.agent ?? new https.Agent({ keepAlive: true });
  const requestOptions: RequestOptions = {
    vapidDetails: options.vapid,
    TTL: options.ttlSeconds ?? DEFAULT_TTL_SECONDS,
    contentEncoding: 'aes128gcm',
    urgency: 'normal',
    agent,
    timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  };
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY));
  let closed = false;

  async function sendOne(payload: string, target: SendTarget): Promise<SendResult> {
    const subscription = subscriptionOf(target);
    if (typeof subscription === 'string') return { ok: false, error: sendError('invalid-token', subscription) };
    try {
      const answer = await sendNotification(subscription, payload, requestOptions);
      return { ok: true, providerMessageId: firstHeader(answer.headers, 'location') ?? null };
    } catch (error) {
      return { ok: false, error: classify(error) };
    }
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
      const results: SendResult[] = new Array(targets.length);
      let next = 0;
      const worker = async () => {
        while (next < targets.length) {
          const index = next++;
          results[index] = await sendOne(payload, targets[index]);
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, targets.length) }, worker));
      return results;
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      agent.destroy();
    },
  };
}

/** The browser's PushSubscription for a target, or why it cannot be one (a dead token: it will never work). */
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

function firstHeader(headers: Record<string, string | string[] | undefined> | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return Array.isArray(value) ? value[0] : value;
}

/** web-push rejects with a WebPushError (statusCode, headers, body) for any non-2xx answer, else with a plain socket error. */
function classify(error: unknown) {
  const failure = error as { statusCode?: unknown; headers?: Record<string, string | string[] | undefined>; body?: unknown; message?: unknown; code?: unknown };
  const status = typeof failure?.statusCode === 'number' ? failure.statusCode : undefined;
  if (status === undefined) {
    const code = typeof failure?.code === 'string' ? `${failure.code}: ` : '';
    return sendError('network', `${code}${String(failure?.message ?? error)}`);
  }
  const body = typeof failure.body === 'string' ? failure.body.trim().slice(0, 300) : '';
  const message = `push service answered ${status}${body ? `: ${body}` : ''}`;
  const retryAfterMs = parseRetryAfter(firstHeader(failure.headers, 'retry-after'));
  if (status === 404 || status === 410) return sendError('unregistered', message);
  if (status === 429) return sendError('rate-limited', message, retryAfterMs);
  if (status === 401 || status === 403) return sendError('auth', message);
  if (status === 413) return sendError('payload-too-large', message);
  if (status === 408 || status >= 500) return sendError('unavailable', message, retryAfterMs);
  if (status >= 400) return sendError('payload-invalid', message);
  return sendError('unavailable', message, retryAfterMs);
}
