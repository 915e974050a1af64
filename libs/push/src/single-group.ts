import type { CrmHeaders, PushRequest } from '@operator/contract';
import { acceptMessages, type AcceptDeps, type Outcome } from './accept';

export interface SingleGroupOptions {
  /**
   * How long the first single of a group waits for others while another group is being stored (0:
   * only those that arrive in the same event-loop turn). With nothing being stored, a group goes at
   * the end of the current event-loop turn.
   */
  windowMs: number;
  /** A group this large is stored at once, without waiting for the rest of the window. */
  maxMessages: number;
  /** After this long a store no longer holds the next group back (STALLED_MS unless given). */
  stalledMs?: number;
}

export interface SingleAcceptor {
  /** What became of this one message, once it is durable (or known not to be). */
  accept(request: PushRequest, headers: CrmHeaders, rawMeta: string | undefined): Promise<Outcome>;
  /** Stores the group still gathering without waiting, and waits until every group is answered. */
  close(): Promise<void>;
}

interface Waiting {
  request: PushRequest;
  headers: CrmHeaders;
  rawMeta: string | undefined;
  resolve: (outcome: Outcome) => void;
  reject: (error: unknown) => void;
}

/**
 * One group is stored at a time: the next gathers until it is done (or full), so that under load
 * groups grow with the time a store takes, each statement, transaction, send job and round trip
 * shared by more singles. A store that has taken STALLED_MS (a lock wait, a failover) no longer
 * holds the next group back: it goes beside it. At most MAX_STORING are stored at once.
 */
const MAX_STORING = 2;
const STALLED_MS = 100;

/**
 * Group commit for single pushes: the singles that arrive within a short window are accepted
 * together, as one batch (one transaction, one set of send jobs), and each is answered with its own
 * outcome. A commit per request is what limits singles; a group costs about what one single did.
 * When the group's stores are down, every request of the group gets the same error (503).
 * `acceptGroup` stores a group (acceptMessages; another in tests).
 */
export function groupSingles(deps: AcceptDeps, options: SingleGroupOptions, acceptGroup: typeof acceptMessages = acceptMessages): SingleAcceptor {
  const stalledMs = options.stalledMs ?? STALLED_MS;
  let gathering: Waiting[] = [];
  let timer: NodeJS.Timeout | undefined;
  let immediate: NodeJS.Immediate | undefined;
  /** The gathering group's time is up, and it waits for a group being stored to finish. */
  let due = false;
  let stallTimer: NodeJS.Timeout | undefined;
  /** The groups being stored (a token each), with when each began. */
  const storing = new Map<object, number>();
  /** Groups not answered yet, stored or not. */
  const unanswered = new Set<Promise<void>>();

  /**
   * Stores a group, calls `stored` once its outcomes are known, and answers its requests in the
   * next turn of the event loop: the next group, started by `stored`, has its statement written to
   * PostgreSQL first, where it would wait behind the writing of every answer.
   */
  async function store(group: Waiting[], stored: () => void) {
    let answer: () => void;
    try {
      const outcomes = await acceptGroup(
        deps,
        group.map((waiting) => waiting.request),
        group.map((waiting) => waiting.headers),
        group.map((waiting) => waiting.rawMeta),
        'single',
      );
      answer = () => group.forEach((waiting, i) => waiting.resolve(outcomes[i]));
    } catch (error) {
      answer = () => group.forEach((waiting) => waiting.reject(error));
    }
    stored();
    await new Promise((resolve) => setImmediate(resolve));
    answer();
  }

  function flush() {
    clearTimeout(timer);
    clearTimeout(stallTimer);
    clearImmediate(immediate);
    timer = stallTimer = immediate = undefined;
    due = false;
    const group = gathering;
    gathering = [];
    if (!group.length) return;
    const token = {};
    storing.set(token, performance.now());
    const answered = store(group, () => {
      storing.delete(token);
      if (due) timeUp();
    }).finally(() => unanswered.delete(answered));
    unanswered.add(answered);
  }

  /** How long until every group being stored has stalled (0: each has), or null when no slot is left until one is done. */
  function untilFree(): number | null {
    if (storing.size >= MAX_STORING) return null;
    let wait = 0;
    for (const began of storing.values()) wait = Math.max(wait, began + stalledMs - performance.now());
    return wait;
  }

  /** At the end of its wait the group goes if nothing is being stored, or if what is has stalled; else once one is done. */
  function timeUp() {
    timer = immediate = undefined;
    clearTimeout(stallTimer);
    stallTimer = undefined;
    const wait = untilFree();
    if (wait !== null && wait <= 0) return flush();
    due = true;
    if (wait !== null) stallTimer = setTimeout(timeUp, wait);
  }

  /**
   * Idle: the group goes at the end of this turn. Busy: it gathers for the window and until the
   * group being stored is done or has stalled, or until it is full.
   */
  function schedule() {
    if (gathering.length >= options.maxMessages) flush();
    else if (timer || immediate || due) return;
    else if (storing.size === 0 || options.windowMs === 0) immediate = setImmediate(timeUp);
    else timer = setTimeout(timeUp, options.windowMs);
  }

  return {
    accept(request, headers, rawMeta) {
      return new Promise<Outcome>((resolve, reject) => {
        gathering.push({ request, headers, rawMeta, resolve, reject });
        schedule();
      });
    },
    async close() {
      flush();
      await Promise.all(unanswered);
    },
  };
}
