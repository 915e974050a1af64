import { engagementSteps, KnownStatuses, STATUS_RANK } from './engagement';

describe('engagementSteps', () => {
  it('moves a push forward only, writing sent first when the send is not recorded yet', () => {
    expect(engagementSteps('accepted', 'delivered')).toEqual(['sent', 'delivered']);
    expect(engagementSteps('sent', 'delivered')).toEqual(['delivered']);
    expect(engagementSteps('failed', 'opened')).toEqual(['opened']);
    expect(engagementSteps('delivered', 'clicked')).toEqual(['clicked']);
  });

  it('ignores a duplicate or late report', () => {
    expect(engagementSteps('delivered', 'delivered')).toEqual([]);
    expect(engagementSteps('opened', 'delivered')).toEqual([]);
    expect(engagementSteps('clicked', 'opened')).toEqual([]);
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
