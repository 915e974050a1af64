/**
 * Calls `expire` once `ms` have passed, but only after input that came meanwhile has been read: a
 * busy process runs due timers before reading sockets, and would fail an answer already waiting.
 * Answers the function that cancels the deadline.
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

/** `pending`, or `late()` thrown once `ms` have passed; `pending` goes on, for whoever else waits on it. */
export function before<T>(pending: Promise<T>, ms: number, late: () => unknown): Promise<T> {
  let cancel: (() => void) | undefined;
  const deadline = new Promise<never>((_, reject) => {
    cancel = setDeadline(ms, () => reject(late()));
  });
  return Promise.race([pending, deadline]).finally(() => cancel?.());
}
