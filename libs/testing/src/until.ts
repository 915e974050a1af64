/** Polls `probe` until it gives a truthy value (answered), or fails after `ms` naming what it waited for. */
export async function until<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, what: string, ms = 10000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Whether `promise` has settled (resolved or rejected), looked at after `ms`, or after the turn of
 * the event loop when no time is given, without waiting for it.
 */
export async function settledWithin(promise: Promise<unknown>, ms?: number): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => (ms === undefined ? setImmediate(resolve) : setTimeout(resolve, ms)));
  return done;
}
