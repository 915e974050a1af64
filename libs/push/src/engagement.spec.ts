import { engagementSteps, STATUS_RANK } from './engagement';

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
