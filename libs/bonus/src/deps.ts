import { randomUUID } from 'node:crypto';
import type { Db } from '@operator/db';
import type { LogSink } from '@operator/config';
import type { ProxySettings } from '@operator/egress';
import { httpWallet, ledgerWallet } from './wallet';
import type { BonusDeps } from './service';

export interface BonusConfigLike {
  CRM_HEADER_WORD: string;
  EVENTS_ORIGIN: string;
  BONUS_PLATFORM_API_KEY: string;
  BONUS_PLATFORM_TIMEOUT_MS: number;
  BONUS_MAX_ATTEMPTS: number;
  BONUS_BACKOFF_MS: number;
  BONUS_CONCURRENCY: number;
  bonus: { platformUrl: string | undefined; exchangeRates: Record<string, number> };
  egress?: ProxySettings;
}

/** See BonusDeps.postMarginMs: a post's lease outlasts its deadline by this much. */
export const POST_MARGIN_MS = 5000;

/** The wallet (the built-in ledger, or the operator's platform when BONUS_PLATFORM_URL is set) and the event settings. */
export function createBonusDeps(db: Db, config: BonusConfigLike, log: LogSink): BonusDeps {
  const { platformUrl, exchangeRates } = config.bonus;
  return {
    db,
    wallet: platformUrl ? httpWallet({ url: platformUrl, apiKey: config.BONUS_PLATFORM_API_KEY || undefined, timeoutMs: config.BONUS_PLATFORM_TIMEOUT_MS, proxy: config.egress }) : ledgerWallet,
    events: { headerWord: config.CRM_HEADER_WORD, origin: config.EVENTS_ORIGIN, exchangeRates },
    log,
    maxAttempts: config.BONUS_MAX_ATTEMPTS,
    backoffMs: config.BONUS_BACKOFF_MS,
    leaseMs: Math.max(60000, config.BONUS_PLATFORM_TIMEOUT_MS * 3),
    owner: randomUUID(),
    concurrency: config.BONUS_CONCURRENCY,
    postMarginMs: POST_MARGIN_MS,
  };
}
