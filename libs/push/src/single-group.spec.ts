import type { CrmHeaders, PushRequest } from '@operator/contract';
import { until } from '@operator/testing';
import type { AcceptDeps, Outcome } from './accept';
import { groupSingles } from './single-group';

// The grouping alone, with groups "stored" by a stand-in that is answered when the test says.

interface Stored {
  ids: number[];
  done: () => void;
}

function standIn() {
  const groups: Stored[] = [];
  const acceptGroup = (_deps: AcceptDeps, requests: PushRequest[]) =>
    new Promise<Outcome[]>((resolve) => {
      const ids = requests.map((request) => request.activity.id);
      groups.push({ ids, done: () => resolve(ids.map((id) => ({ kind: 'accepted', pushId: `push-${id}`, duplicate: false }))) });
    });
  return { groups, acceptGroup };
}

const request = (id: number) => ({ activity: { id } }) as PushRequest;
const headers = {} as CrmHeaders;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('groupSingles', () => {
  it('gathers, while a group is being stored, every single that comes until it is done', async () => {
    const { groups, acceptGroup } = standIn();
    const singles = groupSingles({} as AcceptDeps, { windowMs: 2, maxMessages: 100, stalledMs: 60_000 }, acceptGroup);

    const answers = [singles.accept(request(1), headers, undefined)];
    await until(() => groups.length === 1, 'the first group');
    // Each comes well past the window: while the first group is stored they still make one group.
    for (const id of [2, 3, 4]) {
      answers.push(singles.accept(request(id), headers, undefined));
      await sleep(20);
    }
    expect(groups.map((group) => group.ids)).toEqual([[1]]);

    groups[0].done();
    await until(() => groups.length === 2, 'the second group');
    expect(groups[1].ids).toEqual([2, 3, 4]);
    groups[1].done();
    expect((await Promise.all(answers)).map((outcome) => outcome.kind === 'accepted' && outcome.pushId)).toEqual([1, 2, 3, 4].map((id) => `push-${id}`));
    await singles.close();
  });

  it("starts storing the next group before it answers the requests of the group just stored", async () => {
    const { groups, acceptGroup } = standIn();
    const order: string[] = [];
    const recording = (...args: Parameters<typeof acceptGroup>) => {
      order.push(`store ${args[1].map((r) => r.activity.id).join(',')}`);
      return acceptGroup(...args);
    };
    const singles = groupSingles({} as AcceptDeps, { windowMs: 2, maxMessages: 100, stalledMs: 60_000 }, recording);
    const first = singles.accept(request(1), headers, undefined).then(() => order.push('answered 1'));
    await until(() => groups.length === 1, 'the first group');
    const second = singles.accept(request(2), headers, undefined).then(() => order.push('answered 2'));
    await sleep(20);

    groups[0].done();
    await first;
    expect(order).toEqual(['store 1', 'store 2', 'answered 1']);
    groups[1].done();
    await second;
    await singles.close();
  });

  it('answers every request of a group that could not be stored with its error', async () => {
    const singles = groupSingles({} as AcceptDeps, { windowMs: 2, maxMessages: 100 }, () => Promise.reject(new Error('store down')));
    const answers = [1, 2].map((id) => singles.accept(request(id), headers, undefined));
    for (const answer of answers) await expect(answer).rejects.toThrow('store down');
    await singles.close();
  });

  it('stores the next group beside a store that has stalled, and then waits for one of the two', async () => {
    const { groups, acceptGroup } = standIn();
    const singles = groupSingles({} as AcceptDeps, { windowMs: 2, maxMessages: 100, stalledMs: 50 }, acceptGroup);

    const first = performance.now();
    const answers = [singles.accept(request(1), headers, undefined)];
    await until(() => groups.length === 1, 'the first group');
    answers.push(singles.accept(request(2), headers, undefined));
    await until(() => groups.length === 2, 'the second group, once the first has stalled');
    // Not before the first store had taken the 50 ms of its stall (timers may fire a millisecond early).
    expect(performance.now() - first).toBeGreaterThanOrEqual(49);

    // Two are being stored, both stalled: the next waits for one of them, however long.
    for (const id of [3, 4]) answers.push(singles.accept(request(id), headers, undefined));
    await sleep(250);
    expect(groups.map((group) => group.ids)).toEqual([[1], [2]]);

    groups[1].done();
    await until(() => groups.length === 3, 'the third group');
    expect(groups[2].ids).toEqual([3, 4]);
    groups[0].done();
    groups[2].done();
    expect((await Promise.all(answers)).map((outcome) => outcome.kind === 'accepted' && outcome.pushId)).toEqual([1, 2, 3, 4].map((id) => `push-${id}`));
    await singles.close();
  });

  it('stores a full group at once, even with two groups being stored', async () => {
    const { groups, acceptGroup } = standIn();
    const singles = groupSingles({} as AcceptDeps, { windowMs: 2, maxMessages: 2 }, acceptGroup);
    const answers = [1, 2, 3, 4, 5, 6].map((id) => singles.accept(request(id), headers, undefined));
    expect(groups.map((group) => group.ids)).toEqual([
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    for (const group of groups) group.done();
    await Promise.all(answers);
    await singles.close();
  });

  it('on close, stores the group waiting for a slot without waiting, and waits for every group', async () => {
    const { groups, acceptGroup } = standIn();
    const singles = groupSingles({} as AcceptDeps, { windowMs: 2, maxMessages: 100, stalledMs: 60_000 }, acceptGroup);
    const answers = [singles.accept(request(1), headers, undefined)];
    await until(() => groups.length === 1, 'the first group');
    answers.push(singles.accept(request(2), headers, undefined));
    await sleep(20);
    expect(groups).toHaveLength(1);

    let closed = false;
    const closing = singles.close().then(() => (closed = true));
    expect(groups.map((group) => group.ids)).toEqual([[1], [2]]);
    await sleep(20);
    expect(closed).toBe(false);
    for (const group of groups) group.done();
    await closing;
    expect(closed).toBe(true);
    expect(await Promise.all(answers)).toHaveLength(2);
  });
});
