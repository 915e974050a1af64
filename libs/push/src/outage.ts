import { isDbUnavailable } from '@operator/db';

/**
 * When this worker process last found PostgreSQL out of reach: its send jobs, its recorder and its
 * reconciler report what they meet, and its claims read it. Right after an outage the leases of
 * workers that were cut off may have lapsed while those workers still hold sends they could not
 * record; for one lease's time after the last failure, a claim here takes such a lease for held
 * (see claimDeliveries' lapsedGraceMs), as the reconciler takes nothing (startReconciler), so that
 * those workers renew their leases and record their sends first.
 */
export interface OutageClock {
  /** Called with any error of a PostgreSQL call: an unreachable database is remembered. */
  saw(error: unknown): void;
  /** Milliseconds since the last failure for an unreachable database (Infinity if none). */
  sinceLast(): number;
}

export function createOutageClock(now: () => number = Date.now): OutageClock {
  let last = Number.NEGATIVE_INFINITY;
  return {
    saw(error) {
      if (isDbUnavailable(error)) last = now();
    },
    sinceLast() {
      return now() - last;
    },
  };
}
