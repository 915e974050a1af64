import { advanceMessage, lockMessageStatus, type Sql } from '@operator/db';

// What a device's report (contract 6: delivered, opened, clicked) does to its push.

/** The order a push moves through; a report never moves it back. `sent` and `failed` are the same step. */
export const STATUS_RANK: Record<string, number> = { accepted: 0, sent: 1, failed: 1, delivered: 2, opened: 3, clicked: 4 };
export type EngagementType = 'delivered' | 'opened' | 'clicked';

export type EngagementResult = { found: false } | { found: true; changed: boolean; status: string };

/**
 * The statuses a report moves a push through from `current`, in order: none for a duplicate or
 * late report; `sent` first for one that arrives before the worker recorded the send, so the CRM
 * sees the steps in order.
 */
export function engagementSteps(current: string, reported: EngagementType): string[] {
  if (STATUS_RANK[reported] <= STATUS_RANK[current]) return [];
  return current === 'accepted' ? ['sent', reported] : [reported];
}

/** Records what the player's device reported, with its status events, in the caller's transaction. */
export async function recordEngagement(sql: Sql, pushId: string, type: EngagementType): Promise<EngagementResult> {
  const current = await lockMessageStatus(sql, pushId);
  if (current === undefined) return { found: false };
  const steps = engagementSteps(current, type);
  if (!steps.length) return { found: true, changed: false, status: current };
  await advanceMessage(sql, pushId, steps);
  return { found: true, changed: true, status: type };
}
