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

/**
 * The furthest status each recent push is known to have reached, in this process's memory, so a
 * report that cannot move its push (a device that reports twice, a replayed token) is answered
 * without a transaction. Bounded: past `maxPushes` the push remembered longest ago is forgotten.
 */
export class KnownStatuses {
  private readonly statuses = new Map<string, string>();

  constructor(private readonly maxPushes = 10_000) {}

  /** The status known for `pushId` when a report of `type` would not move it; undefined otherwise. */
  settled(pushId: string, type: EngagementType): string | undefined {
    const status = this.statuses.get(pushId);
    return status !== undefined && !engagementSteps(status, type).length ? status : undefined;
  }

  /** Remembers that `pushId` reached `status` (a status further than the one known). */
  remember(pushId: string, status: string): void {
    const known = this.statuses.get(pushId);
    if (known !== undefined && STATUS_RANK[known] >= STATUS_RANK[status]) return;
    this.statuses.delete(pushId);
    this.statuses.set(pushId, status);
    if (this.statuses.size > this.maxPushes) this.statuses.delete(this.statuses.keys().next().value!);
  }

  get size(): number {
    return this.statuses.size;
  }
}
