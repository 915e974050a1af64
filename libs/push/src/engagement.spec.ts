import { KnownStatuses, reportMoves, STATUS_RANK } from './engagement';

describe('reportMoves', () => {
  it('moves a push forward only', () => {
    expect(reportMoves('sent', 'delivered')).toBe(true);
    expect(reportMoves('sent', 'clicked')).toBe(true);
    expect(reportMoves('delivered', 'clicked')).toBe(true);
  });

  it('ignores a duplicate or late report', () => {
    expect(reportMoves('delivered', 'delivered')).toBe(false);
    expect(reportMoves('opened', 'delivered')).toBe(false);
    expect(reportMoves('clicked', 'opened')).toBe(false);
  });

  it('ranks sent and failed as one step, below every report', () => {
    expect(STATUS_RANK.sent).toBe(STATUS_RANK.failed);
    for (const report of ['delivered', 'opened', 'clicked']) expect(STATUS_RANK[report]).toBeGreaterThan(STATUS_RANK.sent);
  });
});

describe('KnownStatuses', () => {
  it('answers a report that would not move its push, and nothing for one that would or for an unknown push', () => {
    const known = new KnownStatuses();
    expect(known.settled('p', 'delivered')).toBeUndefined();
    known.remember('p', 'opened');
    expect(known.settled('p', 'delivered')).toBe('opened');
    expect(known.settled('p', 'opened')).toBe('opened');
    expect(known.settled('p', 'clicked')).toBeUndefined();
  });

  it('never moves a push back', () => {
    const known = new KnownStatuses();
    known.remember('p', 'clicked');
    known.remember('p', 'delivered');
    expect(known.settled('p', 'opened')).toBe('clicked');
  });

  it('keeps at most its number of pushes, forgetting the one remembered longest ago', () => {
    const known = new KnownStatuses(2);
    known.remember('a', 'delivered');
    known.remember('b', 'delivered');
    known.remember('c', 'delivered');
    expect(known.size).toBe(2);
    expect(known.settled('a', 'delivered')).toBeUndefined();
    expect(known.settled('c', 'delivered')).toBe('delivered');
  });
});
