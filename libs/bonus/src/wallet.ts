import { isRetriedStatus } from '@operator/config';
import { answerReason, createOutbound, OutboundError, type ProxySettings } from '@operator/egress';
import type { CreditRow } from '@operator/db';
import { formatMinor } from './money';

export type WalletResult = { ok: true; reference: string | null } | { ok: false; retry: boolean; error: string };

/**
 * Where credits are carried out. The built-in ledger moves the money inside our own transaction
 * (`postsToLedger`); an external platform is called first, and only its answer is recorded.
 */
export interface Wallet {
  readonly postsToLedger: boolean;
  /** 0: no post. That long to get a connection and that long for the exchange (libs/egress). */
  readonly timeoutMs: number;
  /** `timeoutMs`, when given, shortens the wallet's own. */
  carryOut(credit: CreditRow, timeoutMs?: number): Promise<WalletResult>;
  close?(): Promise<void>;
}

export const ledgerWallet: Wallet = {
  postsToLedger: true,
  timeoutMs: 0,
  async carryOut() {
    return { ok: true, reference: null };
  },
};

export interface HttpWalletOptions {
  url: string;
  apiKey?: string;
  timeoutMs: number;
  proxy?: ProxySettings;
  /** Extra certificate authorities to trust (a local test server's). */
  ca?: string;
}

/** Enough of the platform's answer for its reference or reason; the rest is not read. */
const ANSWER_READ_BYTES = 16 * 1024;

/** What a credit is, as the operator's platform and the back office see it. */
export function creditFields(credit: CreditRow) {
  return {
    credit_id: credit.id,
    /** The brand the credit is for: the same player id in two brands is two wallets. */
    brand_id: Number(credit.brandId),
    kind: credit.kind,
    user_id: credit.userId,
    bonus_code: credit.bonusCode,
    amount: formatMinor(credit.amountMinor, credit.currency),
    currency: credit.currency,
    type: credit.type,
  };
}

function referenceOf(body: Buffer): string | null {
  try {
    const parsed = JSON.parse(body.toString('utf8'));
    return typeof parsed?.reference === 'string' ? parsed.reference : typeof parsed?.id === 'string' ? parsed.id : null;
  } catch {
    return null;
  }
}

/**
 * Posts each credit to the operator's platform, the credit id as Idempotency-Key so a retry never
 * credits twice. A redirect is refused for good: following one could send the API key elsewhere.
 */
export function httpWallet(options: HttpWalletOptions): Wallet {
  const outbound = createOutbound({ proxy: options.proxy, ca: options.ca });
  return {
    postsToLedger: false,
    timeoutMs: options.timeoutMs,
    async carryOut(credit, shorter) {
      const timeoutMs = Math.min(options.timeoutMs, shorter ?? options.timeoutMs);
      const body = JSON.stringify({ ...creditFields(credit), request: credit.request });
      try {
        const answer = await outbound.request({
          url: options.url,
          headers: {
            'content-type': 'application/json',
            'idempotency-key': credit.id,
            ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}),
          },
          body,
          timeoutMs,
          maxBodyBytes: ANSWER_READ_BYTES,
        });
        if (answer.status >= 200 && answer.status < 300) return { ok: true, reference: referenceOf(answer.body) };
        return { ok: false, retry: isRetriedStatus(answer.status), error: `platform answered ${answerReason(answer.status, answer.body)}` };
      } catch (error) {
        const reason = error instanceof OutboundError && error.failure === 'timeout' ? `no answer within ${timeoutMs} ms` : (error as Error).message;
        return { ok: false, retry: true, error: `platform unreachable: ${reason}` };
      }
    },
    close: () => outbound.close(),
  };
}
