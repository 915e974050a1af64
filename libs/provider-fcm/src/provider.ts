import type https from 'node:https';
import { before, createOutbound, type ProxySettings } from '@operator/egress';
import { parseRetryAfter } from '@operator/config';
import { cachedAccessToken, inFlightLimit, sendError, type Notification, type PushProvider, type SendResult, type SendTarget } from '@operator/providers';
import { agentConnector, FCM_HOST, fcmConnections, FcmTransportError, googleConnector, type FcmAnswer } from './connections';
import { fcmAnswerError, fcmError, fcmSendError } from './errors';
import { fcmWireMessage, toFcmMessage } from './message';
import { GoogleTokenError, serviceAccountCredential, type FcmServiceAccount } from './oauth';

export { fcmSendError } from './errors';
export { serviceAccountCredential, type FcmServiceAccount } from './oauth';

// FCM's HTTP v1 API: one messages:send per device, each a stream on a kept HTTP/2 connection. A
// send has one deadline, its retries included. Only a 503 or a connection lost before any answer is
// sent again here; 429 and 500 are results at once, for the queue to retry later.

/** The provider's retry of a send (HTTP 503, a connection lost before any answer); `false`: none. */
export interface FcmSdkRetry {
  maxRetries?: number;
  /** A 503 asking for a longer wait is not retried. Default 1000. */
  maxDelayMs?: number;
}

export interface FcmProviderOptions {
  serviceAccount: FcmServiceAccount;
  /** A test's agent that opens every connection itself; `endpoint`, `ca` and `proxy` are then not used. */
  httpAgent?: https.Agent;
  /** Takes every connection instead of Google's hosts (FCM_ENDPOINT); see googleConnector(). */
  endpoint?: string;
  /** A local server's test CA; the system roots otherwise. */
  ca?: string | Buffer | (string | Buffer)[];
  proxy?: ProxySettings;
  /** Default: as many as the connections take. */
  concurrency?: number;
  maxConnections?: number;
  sdkRetry?: FcmSdkRetry | false;
  /** From waiting for the access token to the answer's last byte (default 15000, firebase-admin's). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 15_000;
export const DEFAULT_MAX_CONNECTIONS = 8;
/** firebase-admin renewed its access token this long before it expired. */
const TOKEN_RENEWAL_MS = 5 * 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function messageName(text: string): string | null {
  try {
    const name = (JSON.parse(text) as { name?: unknown }).name;
    return typeof name === 'string' ? name : null;
  } catch {
    return null;
  }
}

export function createFcmProvider(options: FcmProviderOptions): PushProvider {
  const { serviceAccount } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connect = options.httpAgent
    ? agentConnector(options.httpAgent)
    : googleConnector({ endpoint: options.endpoint, ca: options.ca, proxy: options.proxy, tunnelTimeoutMs: timeoutMs });
  // The token requests go on the house's outbound client, over the same connector.
  const outbound = createOutbound({ connect: (target) => connect(target.servername, {}) });
  const retry = options.sdkRetry ?? {};
  const maxRetries = retry === false ? 0 : Math.max(0, Math.floor(retry.maxRetries ?? 1));
  const maxDelayMs = retry === false ? 0 : Math.max(0, retry.maxDelayMs ?? 1000);
  const limit = inFlightLimit(options.concurrency);

  const credential = serviceAccountCredential(serviceAccount, outbound);
  const accessToken = cachedAccessToken(
    () => credential.getAccessToken().then((granted) => ({ value: granted.access_token, lifetimeMs: granted.expires_in * 1000 })),
    { renewBeforeMs: TOKEN_RENEWAL_MS },
  );
  const connections = fcmConnections(connect, options.maxConnections ?? DEFAULT_MAX_CONNECTIONS);
  const path = `/v1/projects/${encodeURIComponent(serviceAccount.project_id)}/messages:send`;
  let closed: Promise<void> | null = null;

  /** Before sending a 503'd message again (firebase-admin's rule); undefined: not again. */
  const retryDelay = (answer: FcmAnswer, retries: number): number | undefined => {
    if (answer.status !== 503 || retries >= maxRetries) return undefined;
    const asked = parseRetryAfter(answer.retryAfter);
    const delay = asked || (retries === 0 ? 0 : 500 * 2 ** retries);
    return delay > maxDelayMs ? (asked ? undefined : maxDelayMs) : delay;
  };

  /** One attempt: the answer, or the result to give up with. */
  async function attempt(body: string, deadline: { at: number }): Promise<FcmAnswer | SendResult | FcmTransportError> {
    let bearer: string;
    try {
      // The token request goes on for the other sends waiting on it; this one stops at its deadline.
      bearer = await before(accessToken.get(), deadline.at - Date.now(), () => new FcmTransportError(`no access token within ${timeoutMs} ms`, 'app/network-timeout', false));
    } catch (error) {
      if (error instanceof FcmTransportError) return { ok: false, error: fcmSendError(error) };
      const failure = error instanceof GoogleTokenError ? error.failure : credential.lastFailure;
      return { ok: false, error: fcmSendError(fcmError('app/invalid-credential', `Failed to obtain an access token: ${(error as Error).message}`), failure) };
    }
    // Waiting for a stream is waiting for other sends to be answered, not for FCM: not counted.
    const waiting = Date.now();
    const stream = await connections.lease();
    deadline.at += Date.now() - waiting;
    try {
      return await connections.request(
        stream,
        { ':method': 'POST', ':authority': FCM_HOST, ':path': path, authorization: `Bearer ${bearer}`, 'content-type': 'application/json; charset=UTF-8' },
        body,
        deadline.at,
        timeoutMs,
      );
    } catch (error) {
      if (error instanceof FcmTransportError) return error;
      return { ok: false, error: fcmSendError(error) };
    } finally {
      stream.release();
    }
  }

  async function sendOne(body: string): Promise<SendResult> {
    // One deadline for the whole send, its retries included.
    const deadline = { at: Date.now() + timeoutMs };
    for (let retries = 0; ; retries += 1) {
      const outcome = await attempt(body, deadline);
      if (outcome instanceof FcmTransportError) {
        if (outcome.unanswered && retries < maxRetries && Date.now() < deadline.at) continue;
        return { ok: false, error: fcmSendError(outcome) };
      }
      if ('ok' in outcome) return outcome;
      if (outcome.status === 200) return { ok: true, providerMessageId: messageName(outcome.text) };
      const delay = retryDelay(outcome, retries);
      if (delay === undefined || Date.now() + delay >= deadline.at) return { ok: false, error: fcmSendError(fcmAnswerError(outcome.status, outcome.retryAfter, outcome.text)) };
      if (delay > 0) await sleep(delay);
    }
  }

  return {
    name: 'fcm',

    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      if (closed) throw new Error('FCM provider is closed');
      // One message for the notification; each device's body only adds its token.
      const message = fcmWireMessage(toFcmMessage(notification, ''));
      return Promise.all(
        targets.map((target): SendResult | Promise<SendResult> => {
          const token = target.token?.trim();
          // An empty token never reaches FCM: it would refuse the message as a payload error.
          if (!token) return { ok: false, error: sendError('invalid-token', 'empty FCM registration token') };
          return limit(() => sendOne(JSON.stringify({ message: { ...message, token } })));
        }),
      );
    },

    close(): Promise<void> {
      closed ??= connections.close().finally(() => outbound.close());
      return closed;
    },
  };
}
