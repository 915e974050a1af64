/**
 * The first outcome `start` reports, or `timedOut()` once `ms` have passed: whatever comes later
 * (an answer after the timeout, an error after an answer) is ignored. A RabbitMQ publish ends like
 * this (a POST has its deadline in @operator/egress).
 */
export function firstOutcome<T>(ms: number, timedOut: () => T, start: (settle: (outcome: T) => void) => void): Promise<T> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: T) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const timer = setTimeout(() => settle(timedOut()), ms);
    try {
      start(settle);
    } catch (error) {
      clearTimeout(timer);
      throw error;
    }
  });
}
