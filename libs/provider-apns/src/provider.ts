import apn from '@parse/node-apn';
import { parseRetryAfter } from '@operator/config';
import type { ApnsCredential } from './descriptor';
import { proxyFor, type ProxySettings } from '@operator/egress';
import { apnsPayload, createStreamPool, durationSeconds, inFlightLimit, sendError, streamsAllowed, type Notification, type PushProvider, type SendError, type SendResult, type SendTarget } from '@operator/providers';
import { patchNodeApn, proxiedConnection, sessionStreams, shareProviderToken, shutdownProvider, type RetryAfterNote } from './node-apn-patches';

/** A brand's APNs credential, and what tests add to reach a local fake. */
export interface ApnsProviderOptions extends ApnsCredential {
  /** A local fake's test CA; the system roots otherwise. */
  ca?: string | Buffer;
  /** Told the node-apn patches that found nothing to patch; the provider works on without them. */
  onPatchMissing?: (missing: string[]) => void;
  /** One whole send, connection wait included (default 5000). */
  timeoutMs?: number;
  proxy?: ProxySettings;
  maxConnections?: number;
  /** Default: as many as the connections take. */
  concurrency?: number;
}

/** An APNs answer (status + reason), or a transport error without a status. */
interface ApnFailure extends RetryAfterNote {
  device?: string;
  status?: number | string;
  response?: { reason?: string; timestamp?: number | string };
  error?: { message?: string };
}

interface ApnSent {
  device: string;
  'apns-id'?: string;
}

const INVALID_TOKEN_REASONS = new Set(['BadDeviceToken', 'DeviceTokenNotForTopic']);
/** Our credentials or configuration are wrong, whatever the status. */
const AUTH_REASONS = new Set(['TopicDisallowed', 'BadTopic', 'MissingTopic', 'BadCertificate', 'BadCertificateEnvironment', 'InvalidProviderToken', 'MissingProviderToken', 'BadEnvironmentKeyInToken']);
/** Transient on APNs' side although some come as 4xx. */
const TRANSIENT_REASONS = new Set(['ExpiredProviderToken', 'InternalServerError', 'ServiceUnavailable', 'Shutdown', 'IdleTimeout']);

const APNS_HOSTS = { production: 'api.push.apple.com', sandbox: 'api.sandbox.push.apple.com' };
const DEFAULT_TIMEOUT_MS = 5000;
export const DEFAULT_MAX_CONNECTIONS = 4;

/** APNs device tokens are hex; anything else would not even make a valid request path. */
const DEVICE_TOKEN = /^[0-9a-f]+$/i;

/** One APNs answer in our taxonomy; no `status` is no answer at all, a network error. */
export function apnsError(status: number | undefined, reason: string | undefined, detail?: string, retryAfter?: string): SendError {
  if (status === undefined) return sendError('network', `APNs: ${detail ?? reason ?? 'no response'}`);
  const message = `APNs ${status}${reason ? ` ${reason}` : ''}${detail && detail !== reason ? ` (${detail})` : ''}`;
  if (status === 410 || reason === 'Unregistered') return sendError('unregistered', message);
  if (reason && INVALID_TOKEN_REASONS.has(reason)) return sendError('invalid-token', message);
  // Apple's two 429s: TooManyProviderTokenUpdates holds back the whole credential, TooManyRequests
  // only this device. A 429 naming neither is taken as the latter, which holds back nobody else.
  if (reason === 'TooManyProviderTokenUpdates') return sendError('rate-limited', message, parseRetryAfter(retryAfter), 'credential');
  if (status === 429 || reason === 'TooManyRequests') return sendError('rate-limited', message, parseRetryAfter(retryAfter), 'device');
  if (reason && TRANSIENT_REASONS.has(reason)) return sendError('unavailable', message, parseRetryAfter(retryAfter));
  if (status === 403 || (reason && AUTH_REASONS.has(reason))) return sendError('auth', message);
  if (status === 413 || reason === 'PayloadTooLarge') return sendError('payload-too-large', message);
  if (status >= 500) return sendError('unavailable', message, parseRetryAfter(retryAfter));
  // Any other 4xx refuses the request itself: sending it again will not help.
  if (status >= 400) return sendError('payload-invalid', message);
  return sendError('unavailable', message);
}

function failureError(failure: ApnFailure): SendError {
  const detail = failure.error?.message;
  let status = failure.status === undefined || failure.status === null ? undefined : Number(failure.status);
  if (status !== undefined && !Number.isFinite(status)) status = undefined;
  // An error answer with an empty body comes back as a bare error whose message carries the status.
  const bare = status === undefined ? detail?.match(/with status (\d{3})\b/) : null;
  if (bare) status = Number(bare[1]);
  // node-apn keeps APNs' reason in response.reason, except for two it turns into error messages:
  // 403 ExpiredProviderToken (after making a new JWT) and 500 InternalServerError.
  let reason = failure.response?.reason;
  if (!reason && status === 403 && detail === 'ExpiredProviderToken') reason = detail;
  if (!reason && status === 500) reason = 'InternalServerError';
  return apnsError(status, reason, detail, failure.retryAfterHeader);
}

/** Seconds since the epoch at which APNs stops trying; 0: deliver once, now or never. */
function expiryFor(ttlSeconds: number | undefined, now = Date.now()): number | undefined {
  if (ttlSeconds === undefined) return undefined;
  return ttlSeconds === 0 ? 0 : Math.floor(now / 1000) + ttlSeconds;
}

/**
 * APNs over HTTP/2 through @parse/node-apn. Each node-apn Provider is one connection in a stream
 * pool that opens another only when the announced streams are full (APNs may drop them to 1), unlike
 * node-apn's round-robin MultiProvider. node-apn's retries are off: the queue retries with backoff.
 */
export function createApnsProvider(options: ApnsProviderOptions): PushProvider {
  const providerOptions: apn.ProviderOptions = {
    token: { key: options.key, keyId: options.keyId, teamId: options.teamId },
    production: options.production,
    connectionRetryLimit: 0,
  };
  if (options.host !== undefined) providerOptions.address = options.host;
  if (options.port !== undefined) providerOptions.port = options.port;
  if (options.ca !== undefined) providerOptions.ca = [options.ca];
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  providerOptions.requestTimeout = timeoutMs;
  const host = options.host ?? (options.production ? APNS_HOSTS.production : APNS_HOSTS.sandbox);
  const port = options.port ?? 443;
  const proxy = proxyFor(new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`), options.proxy ?? {});
  if (proxy) Object.assign(providerOptions, proxiedConnection({ host, port, ca: options.ca }, proxy, timeoutMs));
  /** The first connection made: the others send its provider token. */
  let signer: apn.Provider | undefined;
  const connection = () => {
    const provider = new apn.Provider(providerOptions);
    const patches: Record<string, boolean> = { ...patchNodeApn(provider, { deadlineMs: timeoutMs }, () => pool.wake()) };
    if (signer) patches.shareProviderToken = shareProviderToken(signer, provider);
    else signer = provider;
    const missing = Object.entries(patches).flatMap(([name, applied]) => (applied ? [] : [name]));
    if (missing.length > 0 && !reported.has(missing.join())) {
      reported.add(missing.join());
      options.onPatchMissing?.(missing);
    }
    return provider;
  };
  const reported = new Set<string>();
  let closed = false;
  // The first connection is made now, so that patches missing are told at once; it connects on its first send.
  let first: apn.Provider | undefined = connection();
  const pool = createStreamPool<apn.Provider>({
    maxConnections: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    open: () => {
      const provider = first ?? connection();
      first = undefined;
      return provider;
    },
    streams: (provider) => streamsAllowed(sessionStreams(provider)),
    settled: (provider) => sessionStreams(provider) !== undefined,
    takesStreams: () => !closed,
  });
  const limit = inFlightLimit(options.concurrency);

  const sendTo = (note: apn.Notification, token: string) =>
    limit(async () => {
      const stream = await pool.lease();
      try {
        const { sent, failed } = await stream.connection.send(note, token);
        return { sent: sent as ApnSent[], failed: failed as ApnFailure[] };
      } finally {
        stream.release();
      }
    });

  return {
    name: 'apns',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('APNs provider is closed');
      if (targets.length === 0) return [];
      const { request, pushId } = notification;

      const note = new apn.Notification();
      note.rawPayload = apnsPayload(request, pushId, notification.trackingToken);
      note.topic = options.topic;
      note.pushType = 'alert';
      note.priority = 10;
      const expiry = expiryFor(durationSeconds(request.android?.ttl));
      if (expiry !== undefined) note.expiry = expiry;

      // One request per distinct token: a device listed twice gets the push once, both targets its result.
      const tokens = [...new Set(targets.map((target) => target.token).filter((token) => DEVICE_TOKEN.test(token)))];
      const byToken = new Map<string, SendResult>();
      for (const { sent, failed } of await Promise.all(tokens.map((token) => sendTo(note, token)))) {
        for (const item of sent) byToken.set(item.device, { ok: true, providerMessageId: item['apns-id'] ?? null });
        for (const item of failed) {
          if (item.device !== undefined) byToken.set(item.device, { ok: false, error: failureError(item) });
        }
      }
      return targets.map(
        (target) =>
          byToken.get(target.token) ??
          (DEVICE_TOKEN.test(target.token)
            ? { ok: false, error: sendError('network', 'APNs: no result for this device') }
            : { ok: false, error: sendError('invalid-token', 'APNs device token is not hex') }),
      );
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await Promise.all([...pool.all(), ...(first ? [first] : [])].map((provider) => shutdownProvider(provider)));
    },
  };
}
