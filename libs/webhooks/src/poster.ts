import { PUSH_STATUS_TOPIC, type DispatchResult, type DueEvent } from '@operator/db';
import { answerReason, createOutbound, OutboundError, type OutboundAnswer, type ProxySettings } from '@operator/egress';
import { backoffMs, isRetriedStatus, parseRetryAfter } from '@operator/config';
import { countDispatch } from '@operator/metrics';
import { statusWebhookBody, type StatusWebhookFormat } from './conversion';
import { SIGNATURE_HEADER, signer } from './signature';

export interface WebhookAuth {
  basic?: { username: string; password: string };
  apiKey?: { header: string; value: string };
}

/** What one attempt to deliver an event came to. */
export type PostOutcome = { ok: true } | { ok: false; retry: boolean; error: string; retryAfterMs: number };

/** Delivers an event some other way than a POST, within timeoutMs; its outcome is taken as a post's. */
export type Publish = (event: DueEvent, body: string) => Promise<PostOutcome>;

export interface PosterOptions {
  /** Where each topic's events go; a topic without a URL is not dispatched (polling only). */
  urls: Record<string, string | undefined>;
  /** Topics published to a message broker instead of POSTed (CRM_EVENTS_TRANSPORT=rabbitmq). */
  publishers?: Record<string, Publish>;
  secret: string;
  auth: WebhookAuth;
  /** The body of push status events: the event (the default) or the CRM's conversion, which posts only the engagements it counts. */
  statusFormat?: StatusWebhookFormat;
  /** Status events posted together as one JSON array (event format only); 1 (the default): each alone, as an object. */
  statusBatchMax?: number;
  timeoutMs: number;
  /** Posts in flight at once, over as many kept-alive connections (fewer with pipelining). */
  concurrency: number;
  /**
   * Posts written on one kept-alive connection before its first answer (HTTP/1.1 pipelining), over
   * concurrency / pipelining connections; 1 (the default): one at a time.
   */
  pipelining?: number;
  maxAgeMs: number;
  backoffMs: number;
  maxBackoffMs: number;
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY. */
  proxy?: ProxySettings;
  /** Extra certificate authorities to trust (a local test server's). */
  ca?: string;
}

export interface Poster {
  /** The topics it delivers: those with a URL, then those published. */
  readonly topics: string[];
  /** How many events may go out in one post that starts with this one (all of its topic). */
  batchMax(event: DueEvent): number;
  /** Posts (or publishes) the events, one alone or a batch as one array; one result per event. */
  dispatch(events: DueEvent[]): Promise<DispatchResult[]>;
  close(): Promise<void>;
}

/** Bytes of an answer read: enough for the JSON reason of a refusal, kept with the dead letter. */
const ANSWER_READ_BYTES = 4096;

/**
 * Delivers events to the CRM: JSON POSTs over kept-alive connections, signed, authenticated as
 * configured, or a publisher's message. Timeouts, network errors, 408, 425, 429 and 5xx are retried
 * with backoff until the event's maximum age; other answers (a redirect too: never followed) and
 * events past their age are dead letters, with the status and the reason the answer gives.
 */
export function createPoster(options: PosterOptions): Poster {
  const posted = Object.entries(options.urls)
    .filter(([, url]) => url)
    .map(([topic]) => topic);
  const publishers = options.publishers ?? {};
  const baseHeaders: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'crm-operator-api/webhook' };
  if (options.auth.basic) {
    const { username, password } = options.auth.basic;
    baseHeaders.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  }
  if (options.auth.apiKey) baseHeaders[options.auth.apiKey.header.toLowerCase()] = options.auth.apiKey.value;
  // A connection per post in flight, kept open between posts, or one per `pipelining` posts in
  // flight, each written behind the others; through the operator's proxy when set.
  const pipelining = options.pipelining ?? 1;
  const outbound = createOutbound({ proxy: options.proxy, ca: options.ca, connectionsPerOrigin: Math.ceil(options.concurrency / pipelining), pipelining });
  const targets = new Map(posted.map((topic) => [topic, new URL(options.urls[topic]!)]));
  const sign = signer(options.secret);

  const statusFormat = options.statusFormat ?? { format: 'event' };
  const statusBatchMax = options.statusBatchMax ?? 1;
  // The conversion endpoint takes one conversion per call.
  if (statusBatchMax > 1 && statusFormat.format !== 'event') throw new Error('statusBatchMax > 1 needs the event format');
  const batched = (event: DueEvent) => statusBatchMax > 1 && event.topic === PUSH_STATUS_TOPIC && targets.has(event.topic);

  /** What to send for the event: undefined when it cannot be sent, null when its format posts nothing for it. */
  const bodyOf = (event: DueEvent): string | null | undefined => event.body ?? (event.push ? statusWebhookBody(statusFormat, event.push) : undefined);

  async function post(url: URL, body: string): Promise<PostOutcome> {
    let answer: OutboundAnswer;
    try {
      answer = await outbound.request({
        url,
        headers: { ...baseHeaders, [SIGNATURE_HEADER]: sign(body) },
        body,
        timeoutMs: options.timeoutMs,
        maxBodyBytes: ANSWER_READ_BYTES,
        // Pipelined posts are sent again by undici when one before them loses the connection. A post
        // is safe to send again: delivery is at least once (a failed post is retried whole; the CRM
        // takes an event_id twice as once), and the scheduler has at most one post of a key in
        // flight, so posts sharing a connection are of other keys and order per key holds.
        pipelined: pipelining > 1,
      });
    } catch (error) {
      const reason = error instanceof OutboundError && error.failure === 'timeout' ? `timeout after ${options.timeoutMs} ms` : (error as Error).message;
      return { ok: false, retry: true, error: reason, retryAfterMs: 0 };
    }
    const { status } = answer;
    if (status >= 200 && status < 300) return { ok: true };
    const retryAfter = answer.headers['retry-after'];
    return { ok: false, retry: isRetriedStatus(status), error: answerReason(status, answer.body), retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter) ?? 0 };
  }

  function resultOf(event: DueEvent, outcome: PostOutcome): DispatchResult & { outcome: 'delivered' | 'retry' | 'dead' } {
    if (outcome.ok) return { event, outcome: 'delivered' };
    const expiresAt = event.expiresAt?.getTime() ?? event.occurredAt.getTime() + options.maxAgeMs;
    const nextAt = Date.now() + backoffMs(event.attempts + 1, options.backoffMs, options.maxBackoffMs, outcome.retryAfterMs);
    if (!outcome.retry) return { event, outcome: 'dead', error: outcome.error };
    if (nextAt > expiresAt) return { event, outcome: 'dead', error: `${outcome.error}; gave up after the maximum age` };
    return { event, outcome: 'retry', nextAttemptAt: new Date(nextAt), error: outcome.error };
  }

  async function dispatch(events: DueEvent[]): Promise<DispatchResult[]> {
    const results: DispatchResult[] = [];
    const sent: DueEvent[] = [];
    const bodies: string[] = [];
    for (const event of events) {
      const body = bodyOf(event);
      if (body === undefined) {
        results.push({ event, outcome: 'dead', error: 'event has no body and no push' });
        countDispatch(event.topic, 'dead');
      }
      // A status the format does not post (e.g. `sent` as a conversion) is done: the polling feed has it.
      else if (body === null) results.push({ event, outcome: 'delivered' });
      else {
        sent.push(event);
        bodies.push(body);
      }
    }
    if (!sent.length) return results;
    const [first] = sent;
    const publish = publishers[first.topic];
    const outcome = await (publish
      ? publish(first, bodies[0])
      : post(targets.get(first.topic)!, batched(first) ? `[${bodies.join(',')}]` : bodies[0]));
    for (const event of sent) {
      const result = resultOf(event, outcome);
      countDispatch(event.topic, result.outcome);
      results.push(result);
    }
    return results;
  }

  return {
    topics: [...posted, ...Object.keys(publishers)],
    batchMax: (event) => (batched(event) ? statusBatchMax : 1),
    dispatch,
    close: () => outbound.close(),
  };
}
