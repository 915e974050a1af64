/**
 * What a fake server has in flight: requests arrived and not answered yet, in all and per
 * connection (any key that names one), with the most there have been at once.
 */
export class InFlightCounter<K> {
  /** Unanswered now. */
  now = 0;
  /** The most unanswered at once. */
  peak = 0;
  /** The most unanswered at once on one connection. */
  peakPerConnection = 0;
  /** The most connections carrying some at once. */
  peakBusyConnections = 0;
  private readonly busy = new Map<K, number>();
  private readonly waiting: Array<{ count: number; reached: () => void }> = [];

  opened(connection: K): void {
    const streams = (this.busy.get(connection) ?? 0) + 1;
    this.busy.set(connection, streams);
    this.now += 1;
    this.peak = Math.max(this.peak, this.now);
    this.peakPerConnection = Math.max(this.peakPerConnection, streams);
    this.peakBusyConnections = Math.max(this.peakBusyConnections, this.busy.size);
    for (const waiter of this.waiting.filter((w) => this.peak >= w.count)) {
      this.waiting.splice(this.waiting.indexOf(waiter), 1);
      waiter.reached();
    }
  }

  /** Resolves once this many have been unanswered at once (true: the peak got there), or after limitMs without (false). */
  until(count: number, limitMs: number): Promise<boolean> {
    if (this.peak >= count) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve(false);
      }, limitMs);
      const waiter = {
        count,
        reached: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      this.waiting.push(waiter);
    });
  }

  settled(connection: K): void {
    const streams = (this.busy.get(connection) ?? 1) - 1;
    if (streams === 0) this.busy.delete(connection);
    else this.busy.set(connection, streams);
    this.now -= 1;
  }

  /** Forgets the peaks (what is in flight now stays). */
  resetPeaks(): void {
    this.peak = this.now;
    this.peakBusyConnections = this.busy.size;
    this.peakPerConnection = Math.max(0, ...this.busy.values());
  }
}
