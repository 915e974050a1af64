/**
 * Calls `expire` once `ms` have passed, but only after the input that came in meanwhile has been
 * read. A process kept busy past a deadline (a long synchronous stretch, a CPU shared with others)
 * runs its due timers before it reads its sockets, and would call late an answer that is already
 * waiting there: for a push, that is a send taken for failed and made again. The timer hands over
 * to `setImmediate`, which runs after the event loop's poll phase, so such an answer settles first
 * and `expire` finds nothing left to do. Answers the function that cancels the deadline.
 */
export function setDeadline(ms: number, expire: () => void): () => void {
  let immediate: NodeJS.Immediate | undefined;
  const timer = setTimeout(
    () => {
      immediate = setImmediate(expire);
    },
    Math.max(0, ms),
  );
  return () => {
    clearTimeout(timer);
    if (immediate) clearImmediate(immediate);
  };
}

/** `pending`, or `late()` thrown once `ms` have passed (see setDeadline); `pending` goes on, for whoever else waits on it. */
export function before<T>(pending: Promise<T>, ms: number, late: () => unknown): Promise<T> {
  let cancel: (() => void) | undefined;
  const deadline = new Promise<never>((_, reject) => {
    cancel = setDeadline(ms, () => reject(late()));
  });
  return Promise.race([pending, deadline]).finally(() => cancel?.());
}
