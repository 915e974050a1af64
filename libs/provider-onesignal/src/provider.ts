import { errorReason, parseRetryAfter } from '@operator/config';
import { createOutbound, httpsOrigin, OutboundError, sanitizeReason, type OutboundAnswer, type ProxySettings } from '@operator/egress';
import { inFlightLimit, sendError, type Notification, type PushProvider, type SendError, type SendResult, type SendTarget } from '@operator/providers';
import { batches, idempotencyKey } from './idempotency';
import { createNotificationBody, toOneSignalContent } from './message';

// OneSignal's REST API: one POST /notifications per batch of a push's subscription ids. Each request's
// idempotency_key (idempotency.ts) makes every transient failure safe to retry, a lost answer included.

export interface OneSignalProviderOptions {
  appId: string;
  restApiKey: string;
  /** Instead of https://api.onesignal.com (ONESIGNAL_ENDPOINT). */
  endpoint?: string;
  proxy?: ProxySettings;
  /** A local test server's CA. */
  ca?: string | Buffer;
  concurrency?: number;
  maxConnections?: number;
  timeoutMs?: number;
  maxSubscriptionsPerRequest?: number;
  /** `Key` for App API keys (the default), `Basic` for legacy REST API keys. */
  authorizationScheme?: 'Key' | 'Basic';
}

export const ONESIGNAL_API = 'https://api.onesignal.com';
export const DEFAULT_MAX_CONNECTIONS = 32;
export const DEFAULT_TIMEOUT_MS = 15_000;
export const MAX_SUBSCRIPTIONS_PER_REQUEST = 20_000;
/** The most of an answer read beyond room to list every id of the request as invalid. */
export const MAX_ANSWER_BYTES = 64 * 1024;
const ANSWER_BYTES_PER_ID = 64;

const SUBSCRIPTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** "All included players are not subscribed". */
const NONE_SUBSCRIBED = /not subscribed/i;
/** A 400 about our key or app id rather than the message. */
const ABOUT_CREDENTIALS = /authorization|api[ _-]?key|app[ _]?id/i;
const NOTIFICATION_ID = /^[0-9A-Za-z-]{1,64}$/;

const failed = (error: SendError): SendResult => ({ ok: false, error });

function errorsOf(answer: unknown): { texts: string[]; invalid: Set<string> } {
  const errors = answer && typeof answer === 'object' ? (answer as { errors?: unknown }).errors : undefined;
  if (Array.isArray(errors)) return { texts: errors.filter((item): item is string => typeof item === 'string'), invalid: new Set() };
  if (!errors || typeof errors !== 'object') return { texts: [], invalid: new Set() };
  const listed = (errors as { invalid_player_ids?: unknown }).invalid_player_ids;
  const invalid = Array.isArray(listed) ? listed.filter((id): id is string => typeof id === 'string').map((id) => id.toLowerCase()) : [];
  return { texts: invalid.length ? [`${invalid.length} invalid subscription ids`] : [], invalid: new Set(invalid) };
}

function readJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Each subscription's result from one answer (`ids`: those it carried, lower case). */
export function resultsOf(answer: OutboundAnswer, ids: readonly string[]): Map<string, SendResult> {
  const { status, headers, body, truncated } = answer;
  const parsed = truncated ? undefined : readJson(body);
  const said = errorsOf(parsed);
  const reason = said.texts.length ? `HTTP ${status}: ${sanitizeReason(said.texts.join('; '))}` : `HTTP ${status}`;
  const retryAfterMs = parseRetryAfter(headers['retry-after']);
  const all = (result: SendResult) => new Map(ids.map((id) => [id, result]));
  const noneSubscribed = said.texts.some((text) => NONE_SUBSCRIBED.test(text));

  if (status >= 200 && status < 300) {
    // A 200 we cannot read may be OneSignal's with a notification made, or a proxy's page: sending
    // again is safe under the same key either way, and OneSignal then answers from its record.
    if (!parsed || typeof parsed !== 'object') {
      return all(failed(sendError('unavailable', `HTTP ${status} with an answer that is not OneSignal's JSON${truncated ? ' (cut: too long)' : ''}`)));
    }
    const id = (parsed as { id?: unknown }).id;
    const notificationId = typeof id === 'string' && NOTIFICATION_ID.test(id) ? id : null;
    return new Map(
      ids.map((subscription): [string, SendResult] => {
        if (said.invalid.has(subscription)) return [subscription, failed(sendError('unregistered', 'OneSignal: the subscription is unknown or not subscribed (invalid_player_ids)'))];
        if (notificationId) return [subscription, { ok: true, providerMessageId: notificationId }];
        // No notification made ("id": ""): none of the ids could receive it, or OneSignal said why not.
        if (noneSubscribed) return [subscription, failed(sendError('unregistered', reason))];
        return [subscription, failed(sendError('unavailable', `${reason} (no notification made)`))];
      }),
    );
  }
  if (status === 429) return all(failed(sendError('rate-limited', reason, retryAfterMs, 'credential')));
  if (status === 401 || status === 403) return all(failed(sendError('auth', reason)));
  if (status === 400) {
    if (noneSubscribed) return all(failed(sendError('unregistered', reason)));
    if (said.texts.some((text) => ABOUT_CREDENTIALS.test(text))) return all(failed(sendError('auth', reason)));
    return all(failed(sendError('payload-invalid', reason)));
  }
  if (status === 413) return all(failed(sendError('payload-too-large', reason)));
  // Not OneSignal's API where ONESIGNAL_ENDPOINT points (a redirect is never followed): our configuration.
  if (status === 404 || (status >= 300 && status < 400)) return all(failed(sendError('auth', `${reason}: the endpoint is not OneSignal's notifications API`)));
  // A Retry-After on a 5xx is OneSignal saying when it takes requests again: every send with this
  // app waits that long. A bare 5xx may be one request's misfortune: only its deliveries wait.
  if (status === 408 || status >= 500) return all(failed(sendError('unavailable', reason, retryAfterMs, retryAfterMs === undefined ? undefined : 'credential')));
  if (status >= 400) return all(failed(sendError('payload-invalid', reason)));
  return all(failed(sendError('unavailable', reason, retryAfterMs)));
}

/** No answer: transient, and safe to send again under the same key. */
function transportError(error: unknown): SendError {
  if (!(error instanceof OutboundError)) return sendError('network', sanitizeReason(errorReason(error)));
  return sendError('network', sanitizeReason(error.failure === 'network' ? error.message : `${error.failure}: ${error.message}`));
}

interface Member {
  index: number;
  deliveryId: string;
  subscriptionId: string;
}

export function createOneSignalProvider(options: OneSignalProviderOptions): PushProvider {
  const url = `${options.endpoint ? httpsOrigin(options.endpoint, 'ONESIGNAL_ENDPOINT') : ONESIGNAL_API}/notifications?c=push`;
  const maxConnections = Math.max(1, Math.floor(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS));
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const perRequest = Math.max(1, Math.min(MAX_SUBSCRIPTIONS_PER_REQUEST, Math.floor(options.maxSubscriptionsPerRequest ?? MAX_SUBSCRIPTIONS_PER_REQUEST)));
  const headers = {
    authorization: `${options.authorizationScheme ?? 'Key'} ${options.restApiKey}`,
    'content-type': 'application/json; charset=utf-8',
    accept: 'application/json',
  };
  const outbound = createOutbound({ proxy: options.proxy, ca: options.ca, connectionsPerOrigin: maxConnections });
  // No more requests in flight than there are connections: one waiting in undici's queue would
  // have its deadline running for the other requests' answers.
  const limit = inFlightLimit(Math.min(options.concurrency ?? maxConnections, maxConnections));
  let closed: Promise<void> | null = null;

  async function post(pushId: string, content: ReturnType<typeof toOneSignalContent>, batch: Member[]): Promise<Map<string, SendResult>> {
    // Two deliveries may name one subscription: OneSignal sends it once, and both get its result.
    const ids = [...new Set(batch.map((member) => member.subscriptionId))];
    const key = idempotencyKey(pushId, batch.map((member) => member.deliveryId));
    const body = JSON.stringify(createNotificationBody(options.appId, content, ids, key));
    try {
      const answer = await outbound.request({ url, method: 'POST', headers, body, timeoutMs, maxBodyBytes: MAX_ANSWER_BYTES + ids.length * ANSWER_BYTES_PER_ID });
      return resultsOf(answer, ids);
    } catch (error) {
      const result = failed(transportError(error));
      return new Map(ids.map((id) => [id, result]));
    }
  }

  return {
    name: 'onesignal',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('OneSignal provider is closed');
      const results: SendResult[] = new Array(targets.length);
      const members: Member[] = [];
      targets.forEach((target, index) => {
        const subscriptionId = target.token?.trim().toLowerCase() ?? '';
        // OneSignal would refuse the whole request for one malformed id: such a device never gets a push.
        if (SUBSCRIPTION_ID.test(subscriptionId)) members.push({ index, deliveryId: target.deliveryId, subscriptionId });
        else results[index] = failed(sendError('invalid-token', 'not a OneSignal subscription id (a UUID)'));
      });
      const content = toOneSignalContent(notification);
      await Promise.all(
        batches(members, perRequest).map(async (batch) => {
          const outcomes = await limit(() => post(notification.pushId, content, batch));
          for (const member of batch) results[member.index] = outcomes.get(member.subscriptionId)!;
        }),
      );
      return results;
    },

    close(): Promise<void> {
      closed ??= outbound.close();
      return closed;
    },
  };
}
