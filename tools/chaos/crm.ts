// The CRM: sends pushes and credits as the contract says it does, and records every answer. What
// is neither acknowledged nor refused (4xx) is sent again until it is.
import type { SeededRandom as Random } from '@operator/testing';
import { sleep } from './util';

export const OPERATOR_KEY = 'dev-operator-key';
export const INTERNAL_KEY = 'dev-internal-key';
export const BRAND_ID = 7;
/** The CRM's keys for the credits, one bound to each brand (appEnv): money is kept per brand. */
export const CREDIT_BRANDS = [1, 2] as const;
export type CreditBrand = (typeof CREDIT_BRANDS)[number];
export const brandKey = (brand: CreditBrand) => `chaos-brand-${brand}-key`;

/** What the CRM expects of a message: accepted, or refused for a reason it can see. */
export type Expectation = 'accept' | 'no-device' | 'invalid';

export interface ChaosMessage {
  activityId: number;
  userId: string;
  expect: Expectation;
  body: Record<string, unknown>;
  /** The meta sent, which every status event must carry back. */
  meta: Record<string, unknown>;
  pushId?: string;
  ackAt?: number;
  /** 4xx single or `failed` in a batch: skipped by the CRM. */
  refused?: string;
  gaveUp?: boolean;
}

export interface ChaosCredit {
  serviceId: string;
  /** Sent with the key bound to it; each X-Service-Id is sent under both brands, as two credits. */
  brand: CreditBrand;
  kind: 'bonus' | 'funds';
  userId: string;
  body: Record<string, unknown>;
  amountMinor: number;
  creditId?: string;
  ackAt?: number;
  refused?: string;
  gaveUp?: boolean;
}

/** Something the gateway answered that the CRM did not expect (a wrong answer, not an outage). */
export interface Anomaly {
  at: number;
  what: string;
}

/** One answer the CRM got (status undefined: the connection failed), and from which gateway. */
export interface Answer {
  gateway: number;
  at: number;
  status?: number;
}

export class CrmDriver {
  /** Answers by endpoint and status ('network' for a connection that failed). */
  readonly statuses = new Map<string, Map<string, number>>();
  readonly answers: Answer[] = [];
  /** Answers 5xx other than 503, with the body. */
  readonly bad5xx: { at: number; path: string; status: number; body: string }[] = [];
  readonly anomalies: Anomaly[] = [];
  resends = { messages: 0, credits: 0 };
  private stopped = false;
  private readonly bases: string[];
  private turn = 0;

  /** With several gateways (`base` a list), the CRM's requests alternate between them. */
  constructor(
    base: string | string[],
    private readonly rng: Random,
    private readonly deadline: () => number,
  ) {
    this.bases = Array.isArray(base) ? base : [base];
  }

  stop(): void {
    this.stopped = true;
  }

  private count(path: string, status: string): void {
    const key = path.startsWith('/channels/push/') ? path : path.split('?')[0];
    let byStatus = this.statuses.get(key);
    if (!byStatus) this.statuses.set(key, (byStatus = new Map()));
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  }

  async call(path: string, body: unknown, headers: Record<string, string> = {}, key = OPERATOR_KEY): Promise<{ status?: number; json?: any; retryAfterMs: number }> {
    const gateway = this.turn++ % this.bases.length;
    try {
      const response = await fetch(`${this.bases[gateway]}${path}`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(20000),
      });
      const text = await response.text();
      this.count(path, String(response.status));
      this.answers.push({ gateway, at: Date.now(), status: response.status });
      if (response.status >= 500 && response.status !== 503) this.bad5xx.push({ at: Date.now(), path, status: response.status, body: text.slice(0, 300) });
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      const retryAfter = Number(response.headers.get('retry-after'));
      return { status: response.status, json, retryAfterMs: Number.isFinite(retryAfter) ? retryAfter * 1000 : 0 };
    } catch {
      this.count(path, 'network');
      this.answers.push({ gateway, at: Date.now() });
      return { retryAfterMs: 0 };
    }
  }

  /** The CRM's pause before sending again: short, growing, and never past a Retry-After of a few seconds. */
  private async backoff(attempt: number, retryAfterMs: number): Promise<void> {
    const base = Math.min(2000, 100 * 2 ** Math.min(attempt, 5));
    await sleep(Math.max(Math.min(retryAfterMs, 3000), base / 2 + this.rng.next() * base / 2));
  }

  private giveUp(): boolean {
    return this.stopped || Date.now() > this.deadline();
  }

  private acknowledge(message: ChaosMessage, pushId: unknown, how: string): void {
    if (typeof pushId !== 'string' || !pushId) {
      this.anomalies.push({ at: Date.now(), what: `${how} for activity ${message.activityId} without a push_id` });
      return;
    }
    if (message.pushId && message.pushId !== pushId) {
      this.anomalies.push({ at: Date.now(), what: `activity ${message.activityId}: push_id ${pushId} on a resend, ${message.pushId} before` });
      return;
    }
    if (message.expect !== 'accept') this.anomalies.push({ at: Date.now(), what: `activity ${message.activityId} (${message.expect}) was accepted as ${pushId}` });
    message.pushId = pushId;
    message.ackAt ??= Date.now();
  }

  private refuse(message: ChaosMessage, reason: string): void {
    message.refused = reason;
    if (message.expect === 'accept') this.anomalies.push({ at: Date.now(), what: `activity ${message.activityId} refused: ${reason}` });
  }

  async single(message: ChaosMessage): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      const answer = await this.call('/channels/push/single', message.body);
      if (answer.status !== undefined && answer.status >= 200 && answer.status < 300) return this.acknowledge(message, answer.json?.push_id, 'a 2xx');
      if (answer.status !== undefined && answer.status >= 400 && answer.status < 500) return this.refuse(message, `HTTP ${answer.status} ${answer.json?.error ?? ''}`);
      if (this.giveUp()) {
        message.gaveUp = true;
        return;
      }
      await this.backoff(attempt, answer.retryAfterMs);
    }
  }

  /** POST /channels/push/batch; `fatal`, unlisted messages and non-200 answers are sent again. */
  async batch(messages: ChaosMessage[]): Promise<void> {
    let pending = messages;
    for (let attempt = 0; pending.length; attempt += 1) {
      const answer = await this.call('/channels/push/batch', pending.map((m) => m.body));
      if (answer.status === 200 && answer.json && typeof answer.json === 'object') {
        const byId = new Map(pending.map((m) => [m.activityId, m]));
        const listed = new Set<number>();
        for (const entry of answer.json.successful ?? []) {
          const message = byId.get(entry?.id);
          if (!message) continue;
          listed.add(message.activityId);
          this.acknowledge(message, entry.push_id, 'successful');
        }
        for (const entry of answer.json.failed ?? []) {
          const message = byId.get(entry?.id);
          if (!message) continue;
          listed.add(message.activityId);
          this.refuse(message, `failed: ${entry.error ?? ''}`);
        }
        // fatal and unlisted: sent again (an unreadable message is failed with id null and stays unlisted).
        pending = pending.filter((m) => !listed.has(m.activityId) && m.expect !== 'invalid');
        for (const message of messages) {
          if (message.expect === 'invalid' && !listed.has(message.activityId) && !message.refused && !message.pushId) message.refused = 'failed (unreadable)';
        }
        if (!pending.length) return;
      }
      if (this.giveUp()) {
        for (const message of pending) message.gaveUp = true;
        return;
      }
      await this.backoff(attempt, answer.retryAfterMs);
    }
  }

  /** The same message again, after it was acknowledged: the same push_id, nothing sent again. */
  async resend(message: ChaosMessage, asBatch: boolean): Promise<void> {
    this.resends.messages += 1;
    const before = message.pushId;
    if (asBatch) await this.batch([message]);
    else await this.single(message);
    if (before && message.pushId !== before) this.anomalies.push({ at: Date.now(), what: `activity ${message.activityId}: resend answered ${message.pushId}, first ${before}` });
  }

  async credit(credit: ChaosCredit, resend = false): Promise<void> {
    if (resend) this.resends.credits += 1;
    const path = credit.kind === 'bonus' ? '/bonus/credit' : '/bonus/credit/funds';
    const headers = {
      'x-service-id': credit.serviceId,
      'x-service-activityid': '900',
      'x-service-actionid': '3',
      'x-service-actiongroupid': '2',
      'x-service-actioncommunicationprofileid': '9',
      'x-service-triggerhash': `th-${credit.serviceId}`,
    };
    for (let attempt = 0; ; attempt += 1) {
      const answer = await this.call(path, credit.body, headers, brandKey(credit.brand));
      if (answer.status === 200) {
        const creditId = answer.json?.credit_id;
        if (typeof creditId !== 'string') this.anomalies.push({ at: Date.now(), what: `credit ${credit.brand}/${credit.serviceId}: 200 without credit_id` });
        else if (credit.creditId && credit.creditId !== creditId) this.anomalies.push({ at: Date.now(), what: `credit ${credit.brand}/${credit.serviceId}: credit_id ${creditId} on a resend, ${credit.creditId} before` });
        else credit.creditId = creditId;
        credit.ackAt ??= Date.now();
        return;
      }
      if (answer.status !== undefined && answer.status >= 400 && answer.status < 500) {
        credit.refused = `HTTP ${answer.status} ${answer.json?.error ?? ''}`;
        this.anomalies.push({ at: Date.now(), what: `credit ${credit.brand}/${credit.serviceId} refused: ${credit.refused}` });
        return;
      }
      if (this.giveUp()) {
        credit.gaveUp = true;
        return;
      }
      await this.backoff(attempt, answer.retryAfterMs);
    }
  }
}

/** `add` waits while the pool is full. */
export class Pool {
  private running = 0;
  private readonly waiters: (() => void)[] = [];
  private readonly all = new Set<Promise<void>>();

  constructor(private readonly limit: number) {}

  async add(task: () => Promise<void>): Promise<void> {
    while (this.running >= this.limit) await new Promise<void>((resolve) => this.waiters.push(resolve));
    this.running += 1;
    const run = task()
      .catch((error) => console.error('chaos: task failed', error))
      .finally(() => {
        this.running -= 1;
        this.all.delete(run);
        this.waiters.shift()?.();
      });
    this.all.add(run);
  }

  async drain(): Promise<void> {
    while (this.all.size) await Promise.all([...this.all]);
  }
}
