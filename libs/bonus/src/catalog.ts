// The values the CRM's bonus events accept (crm-integration-facts.md); they are case-sensitive.
export const BONUS_TYPES = ['NoDeposit', 'WelcomeBonus', 'CashbackBonus', 'ReloadBonus', 'WagerFree', 'FreeSpins', 'RiskFreeBet', 'Undefined'] as const;
export const BONUS_PRODUCTS = ['Casino', 'Sportsbook', 'Lotto', 'Poker'] as const;
export const BONUS_STATUSES = ['Pending', 'Created', 'Ongoing', 'Completed', 'AutoCompleted', 'Forfeited', 'Expired', 'Lost', 'Reversed'] as const;
export type BonusStatus = (typeof BONUS_STATUSES)[number];

/** Statuses a bonus does not leave. */
export const FINAL_BONUS_STATUSES: ReadonlySet<string> = new Set(['Completed', 'AutoCompleted', 'Forfeited', 'Expired', 'Lost', 'Reversed']);
/** Final statuses in which the player keeps the money, turned into real money. */
export const TURNED_REAL_STATUSES: ReadonlySet<string> = new Set(['Completed', 'AutoCompleted']);

export function canMove(from: string, to: string): boolean {
  return from !== to && !FINAL_BONUS_STATUSES.has(from) && (BONUS_STATUSES as readonly string[]).includes(to);
}
