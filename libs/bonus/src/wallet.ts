import { isRetriedStatus } from '@operator/config';
import type { CreditRow } from '@operator/db';
import { formatMinor } from './money';

export type WalletResult = { ok: true; reference: string | null } | { ok: false; retry: boolean; error: string };

/**
 * Where credits are carried out. The built-in ledger moves the money inside our own transaction
 * (`postsToLedger`); an external platform is called first, and only its answer is recorded.
 */
export interface Wallet {
  readonly postsToLedger: boolean;
  carryOut(credit: CreditRow): Promise<WalletResult>;
}

export const ledgerWallet: Wallet = {
  postsToLedger: true,
  async carryOut() {
    return { ok: true, reference: null };
  },
};

export interface HttpWalletOptions {
  url: string;
  apiKey?: string;
  timeoutMs: number;
}

/** What a credit is, as the operator's platform and the back office see it. */
export function creditFields(credit: CreditRow) {
  return {
    credit_id: credit.id,
    kind: credit.kind,
    user_id: credit.userId,
    bonus_code: credit.bonusCode,
    amount: formatMinor(credit.amountMinor, credit.currency),
    currency: credit.currency,
    type: credit.type,
  };
}

/**
 * Forwards each credit to the operator's own platform as a JSON POST, with the credit id as the
 * Idempotency-Key, so a retried call never credits twice there either. 2xx: done; 5xx, 408, 425,
 * 429, timeouts and network errors: retried later; any other answer: refused for good.
 */
export function httpWallet(options: HttpWalletOptions): Wallet {
  return {
    postsToLedger: false,
    async carryOut(credit) {
      const body = JSON.stringify({ ...creditFields(credit), request: credit.request });
      try {
        const response = await fetch(options.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'idempotency-key': credit.id,
            ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}),
          },
          body,
          signal: AbortSignal.timeout(options.timeoutMs),
        });
        const text = await response.text().catch(() => '');
        if (response.ok) {
          let reference: string | null = null;
          try {
            const parsed = JSON.parse(text);
            reference = typeof parsed?.reference === 'string' ? parsed.reference : typeof parsed?.id === 'string' ? parsed.id : null;
          } catch {
            reference = null;
          }
          return { ok: true, reference };
        }
        const retry = isRetriedStatus(response.status);
        return { ok: false, retry, error: `platform answered HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}` };
      } catch (error) {
        const reason = (error as Error).name === 'TimeoutError' ? `no answer within ${options.timeoutMs} ms` : ((error as Error).cause as Error)?.message ?? (error as Error).message;
        return { ok: false, retry: true, error: `platform unreachable: ${reason}` };
      }
    },
  };
}
