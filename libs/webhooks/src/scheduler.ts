import pLimit from 'p-limit';

export interface KeyedSchedulerOptions<T> {
  /** Groups running at once. */
  concurrency: number;
  /** Items of one key run one at a time, in the order they were added; other keys' in parallel. */
  keyOf(item: T): string;
  /** Runs a group of items taken together; their keys are free again once it settles. */
  run(group: T[]): Promise<void>;
  /** Most items in a group that starts with `first` (default 1), and whether `item` may join it. */
  groupMax?(first: T): number;
  joins?(first: T, item: T): boolean;
  /** Whether the item may still start; one that may not is taken out and handed to `refused`. */
  admit?(item: T): boolean;
  refused?(items: T[]): void;
  /** Called after every take, with the group taken (possibly none). */
  taken?(group: T[]): void;
  /** A group's run threw; its keys are free again and the others carry on. */
  failed?(error: unknown, group: T[]): void;
}

export interface KeyedScheduler<T> {
  /** Adds items behind those waiting, and starts what may start. */
  add(items: T[]): void;
  /** Takes the waiting items that match out, in order. */
  remove(matches: (item: T) => boolean): T[];
  /** Items waiting (not started). */
  readonly waiting: number;
  /** Resolves once nothing runs and nothing waiting can start. */
  idle(): Promise<void>;
}

/**
 * Runs items in groups, at most `concurrency` groups at once: an item waits while an item of its
 * key runs or an earlier one of its key waits, so each key's items go one at a time, in order.
 * A group is taken when a place is free, so `admit` judges an item at the moment it would start.
 */
export function createKeyedScheduler<T>(options: KeyedSchedulerOptions<T>): KeyedScheduler<T> {
  const { keyOf, concurrency } = options;
  const limit = pLimit(concurrency);
  /** The items waiting are waiting[head..]: taking the first moves `head`, not every item behind it. */
  let waiting: T[] = [];
  let head = 0;
  /** Keys of the groups taken and not settled yet. */
  const running = new Set<string>();
  const idlers: (() => void)[] = [];

  /** The next group: up to groupMax items that fit together, each the first waiting of its key. */
  function take(): T[] {
    for (;;) {
      const group: T[] = [];
      let max = 1;
      const passed = new Set<string>();
      const refused: T[] = [];
      /** Indexes of the items taken out of `waiting`. */
      const out: number[] = [];
      // Stops as soon as the group is full: with many items waiting, a take reads only the head.
      for (let i = head; i < waiting.length && !(group.length && group.length >= max); i++) {
        const item = waiting[i];
        const key = keyOf(item);
        const fits = group.length === 0 || options.joins?.(group[0], item);
        if (!fits || running.has(key) || passed.has(key)) {
          passed.add(key);
          continue;
        }
        passed.add(key);
        out.push(i);
        if (options.admit && !options.admit(item)) {
          refused.push(item);
          continue;
        }
        if (!group.length) max = options.groupMax?.(item) ?? 1;
        group.push(item);
        running.add(key);
      }
      if (out.length === 1 && out[0] === head) takeFirst();
      else if (out.length === 1) waiting.splice(out[0], 1);
      else if (out.length) {
        const gone = new Set(out);
        waiting = waiting.filter((_, i) => i >= head && !gone.has(i));
        head = 0;
      }
      if (refused.length) options.refused?.(refused);
      options.taken?.(group);
      // What waited behind a refused item may start now.
      if (group.length || !refused.length || head === waiting.length) return group;
    }
  }

  /** Takes the first item waiting out; the array is cut down once its taken part is the larger one. */
  function takeFirst() {
    (waiting as (T | undefined)[])[head++] = undefined;
    if (head === waiting.length) waiting = [];
    else if (head < 1024 || head < waiting.length / 2) return;
    else waiting = waiting.slice(head);
    head = 0;
  }

  /** Frees the group's keys once its run settled, and starts what follows. */
  function settle(group: T[], error?: { error: unknown }) {
    for (const item of group) running.delete(keyOf(item));
    if (error) options.failed?.(error.error, group);
    pump();
  }

  /** Starts groups while places are free; p-limit's count of a run drops before its promise settles. */
  function pump() {
    while (limit.activeCount + limit.pendingCount < concurrency) {
      const group = take();
      if (!group.length) break;
      limit(options.run, group).then(
        () => settle(group),
        (error: unknown) => settle(group, { error }),
      );
    }
    // A group holds its keys from its take until it settled: none held, nothing runs.
    if (!running.size) for (const resolve of idlers.splice(0)) resolve();
  }

  return {
    add(items) {
      if (!items.length) return;
      for (const item of items) waiting.push(item);
      pump();
    },
    remove(matches) {
      const removed: T[] = [];
      waiting = waiting.filter((item, i) => {
        if (i < head) return false;
        if (!matches(item)) return true;
        removed.push(item);
        return false;
      });
      head = 0;
      return removed;
    },
    get waiting() {
      return waiting.length - head;
    },
    idle() {
      const settled = new Promise<void>((resolve) => idlers.push(resolve));
      pump();
      return settled;
    },
  };
}
