import { firstOutcome } from './first-outcome';

describe('firstOutcome', () => {
  it('resolves with the first outcome reported and ignores the later ones', async () => {
    const outcome = await firstOutcome(1000, () => 'timeout', (settle) => {
      settle('answer');
      settle('error after the answer');
    });
    expect(outcome).toBe('answer');
  });

  it('resolves with the timeout outcome when nothing is reported in time, and ignores a late answer', async () => {
    let late: ((outcome: string) => void) | undefined;
    const outcome = await firstOutcome(20, () => 'timeout', (settle) => {
      late = settle;
    });
    late!('late answer');
    expect(outcome).toBe('timeout');
  });

  it('rejects when start throws, and its timer does not fire afterwards', async () => {
    const timedOut = jest.fn(() => 'timeout');
    await expect(
      firstOutcome(20, timedOut, () => {
        throw new Error('bad request options');
      }),
    ).rejects.toThrow('bad request options');
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(timedOut).not.toHaveBeenCalled();
  });
});
