import { recordReport, type ReportRecord, type Sql } from '@operator/db';

// What a device's report (contract 6: delivered, opened, clicked) does to its push.

/** The order a push moves through; a report never moves it back. `sent` and `failed` are the same step. */
export const STATUS_RANK: Record<string, number> = { accepted: 0, sent: 1, failed: 1, delivered: 2, opened: 3, clicked: 4 };
export type EngagementType = 'delivered' | 'opened' | 'clicked';

/**
 * `sent: false`: the push was not sent to any device (still accepted, or failed on every device),
 * so a device cannot have seen it and the report is refused.
 */
export type EngagementResult = ReportRecord;

/** Whether a report of `reported` moves a push at `current`: only forward, never for a duplicate or late report. */
export function reportMoves(current: string, reported: EngagementType): boolean {
  return STATUS_RANK[reported] > STATUS_RANK[current];
}

/** The statuses a report of `reported` moves a push on from (once it was sent to a device). */
const MOVES_FROM = Object.fromEntries(
  (['delivered', 'opened', 'clicked'] as const).map((reported) => [reported, Object.keys(STATUS_RANK).filter((status) => status !== 'accepted' && reportMoves(status, reported))]),
) as Record<EngagementType, string[]>;

/**
 * Records what the player's device reported, with its status event, in the caller's transaction:
 * nothing for a push that was not sent to any device.
 */
export async function recordEngagement(sql: Sql, pushId: string, type: EngagementType): Promise<EngagementResult> {
  return recordReport(sql, pushId, type, MOVES_FROM[type]);
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
    return status !== undefined && !reportMoves(status, type) ? status : undefined;
  }

  /** Remembers that `pushId`, sent to a device, reached `status` (a status further than the one known). */
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
