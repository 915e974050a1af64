// The responsible-gambling gate of the push workers: before a player's devices are sent to, the
// operator's own records (GET /userblocks/{user_id}, GET /userconsents/{user_id}, the endpoints it
// serves the CRM) say whether the player may get a push at all.

/** A player of a brand: what one verdict is about. */
export interface Player {
  brandId: string;
  userId: string;
}

export const playerKey = (player: Player) => `${player.brandId}/${player.userId}`;

/** Why a push is not sent: the failed delivery's error code is `suppressed:<reason>`. */
export type SuppressionReason = 'excluded' | 'blocked' | 'no-consent' | 'unverified';

export type Verdict =
  | { kind: 'allowed' }
  /** An active block (Excluded; Blocked or a COMPLIANCE_BLOCK_TYPES type), or push consent not opted in. */
  | { kind: 'suppressed'; reason: Exclude<SuppressionReason, 'unverified'> }
  /** The operator's endpoint gave no usable answer (no answer, 5xx, unreadable): wait and ask again. */
  | { kind: 'unverified'; error: string };

export interface ComplianceGate {
  /**
   * One verdict per distinct player (keyed by playerKey), never more than one lookup per player at a
   * time and COMPLIANCE_CONCURRENCY players looked up at once; a cached answer costs no request.
   */
  check(players: readonly Player[]): Promise<Map<string, Verdict>>;
  /** Drops these players' cached answers (every brand's) in this process. */
  forget(userIds: readonly string[]): void;
  close(): Promise<void>;
}

/** The Redis channel the gateway publishes changed players on (a JSON array of user ids); every worker forgets them. */
export const COMPLIANCE_CHANNEL = 'operator:compliance:changed';
