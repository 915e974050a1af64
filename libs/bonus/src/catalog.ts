import { BONUS_STATUSES } from '@operator/contract';

// The values the CRM's bonus events accept (crm-integration-facts.md) are part of the contract.
export { BONUS_PRODUCTS, BONUS_STATUSES, BONUS_TYPES, type BonusStatus } from '@operator/contract';

/** Statuses a bonus does not leave. */
export const FINAL_BONUS_STATUSES: ReadonlySet<string> = new Set(['Completed', 'AutoCompleted', 'Forfeited', 'Expired', 'Lost', 'Reversed']);
/** Final statuses in which the player keeps the money, turned into real money. */
export const TURNED_REAL_STATUSES: ReadonlySet<string> = new Set(['Completed', 'AutoCompleted']);
/** Statuses of a bonus still running, which its validity ends: past it, the bonus moves to Expired. */
export const EXPIRING_BONUS_STATUSES: readonly string[] = ['Pending', 'Created', 'Ongoing'];

export function canMove(from: string, to: string): boolean {
  return from !== to && !FINAL_BONUS_STATUSES.has(from) && (BONUS_STATUSES as readonly string[]).includes(to);
}
