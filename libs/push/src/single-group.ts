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
}

export interface SingleAcceptor {
  /** What became of this one message, once it is durable (or known not to be). */
  accept(request: PushRequest, headers: CrmHeaders, rawMeta: string | undefined): Promise<Outcome>;
  /** Stores the group still gathering without waiting, and waits for every group being stored. */
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
 * Groups being stored at once. The next group gathers until one of them is done (or it is full):
 * under load groups grow with the time a store takes, rather than going every window at a few
 * messages each, every one paying its own round trips, transaction and send job.
 */
const MAX_STORING = 2;

/**
 * Group commit for single pushes: the singles that arrive within a short window are accepted
 * together, as one batch (one transaction, one set of send jobs), and each is answered with its own
 * outcome. A commit per request is what limits singles; a group costs about what one single did.
 * When the group's stores are down, every request of the group gets the same error (503).
 * `acceptGroup` stores a group (acceptMessages; another in tests).
 */
export function groupSingles(deps: AcceptDeps, options: SingleGroupOptions, acceptGroup: typeof acceptMessages = acceptMessages): SingleAcceptor {
  let gathering: Waiting[] = [];
  let timer: NodeJS.Timeout | undefined;
  let immediate: NodeJS.Immediate | undefined;
  /** The gathering group's time is up, and it waits for a group being stored to finish. */
  let due = false;
  const storing = new Set<Promise<void>>();

  async function store(group: Waiting[]) {
    try {
      const outcomes = await acceptGroup(
        deps,
        group.map((waiting) => waiting.request),
        group.map((waiting) => waiting.headers),
        group.map((waiting) => waiting.rawMeta),
        'single',
      );
      group.forEach((waiting, i) => waiting.resolve(outcomes[i]));
    } catch (error) {
      for (const waiting of group) waiting.reject(error);
    }
  }

  function flush() {
    clearTimeout(timer);
    clearImmediate(immediate);
    timer = immediate = undefined;
    due = false;
    const group = gathering;
    gathering = [];
    if (!group.length) return;
    const stored = store(group).finally(() => {
      storing.delete(stored);
      if (due) flush();
    });
    storing.add(stored);
  }

  /** At the end of its wait the group goes, unless MAX_STORING groups are being stored: then when one is done. */
  function timeUp() {
    timer = immediate = undefined;
    if (storing.size >= MAX_STORING) due = true;
    else flush();
  }

  /**
   * Idle: the group goes at the end of this turn. Busy: it gathers for the window and until fewer
   * than MAX_STORING groups are being stored, or until it is full.
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
      await Promise.all(storing);
    },
  };
}
