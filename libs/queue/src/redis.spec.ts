import { isConnectionLoss, isJobNoLongerHeld } from './redis';

// What counts as Redis being away (logged once per outage, the gateway answering 503) rather than
// an error of ours (logged each time): the failover and Cluster errors included.
describe('isConnectionLoss', () => {
  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' })],
    ['a closed connection', new Error('Connection is closed.')],
    ['a replica where the master was', new Error("READONLY You can't write against a read only replica.")],
    ['a blocked pop ended by a role change', new Error('UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)')],
    ['every Sentinel away', new Error('All sentinels are unreachable. Retrying from scratch after 200ms. Last error: Connection is closed.')],
    ['a Cluster without a majority', new Error('CLUSTERDOWN The cluster is down')],
    ['a slot being moved', new Error('TRYAGAIN Multiple keys request during rehashing of slot')],
    ['a Cluster that cannot be reached', new Error('Failed to refresh slots cache.')],
    ['slots moving faster than followed', new Error('Too many Cluster redirections. Last error: Error: MOVED 3999 127.0.0.1:7001')],
    ['a transaction redirected to a master that is gone', new Error('MOVED 885 127.0.0.1:38969')],
    ['a transaction asked elsewhere mid-migration', new Error('ASK 885 127.0.0.1:38970')],
  ])('counts %s', (_what, error) => {
    expect(isConnectionLoss(error)).toBe(true);
  });

  it.each([
    ['a script error', new Error('ERR Error running script (call to f_1234): @user_script:1: wrong number of arguments')],
    ['a wrong type', new Error('WRONGTYPE Operation against a key holding the wrong kind of value')],
    ['a full Redis', new Error("OOM command not allowed when used memory > 'maxmemory'.")],
    ['a script that mentions a move', new Error('ERR Error running script: MOVED is not a command')],
  ])('does not count %s', (_what, error) => {
    expect(isConnectionLoss(error)).toBe(false);
  });
});

// BullMQ's refusals of a finish from a worker that no longer holds the job (a reply lost to a
// reconnection, or a lapsed lock): warned, not logged as errors.
describe('isJobNoLongerHeld', () => {
  it.each([
    ['a missing lock', new Error('Missing lock for job push-1. moveToFinished')],
    ['another lock', new Error('Lock mismatch for job push-1. Cmd moveToDelayed from active')],
    ['a job gone', new Error('Missing key for job push-1. moveToFinished')],
    ['a job moved on', new Error('Job push-1 is not in the active state. moveToFinished')],
  ])('counts %s', (_what, error) => {
    expect(isJobNoLongerHeld(error)).toBe(true);
  });

  it.each([
    ['a closed connection', new Error('Connection is closed.')],
    ['a parent job gone', new Error('Missing key for parent job bull:q:1. moveToFinished')],
    ['a script error naming a lock', new Error('ERR Error running script: Missing lock for job push-1')],
  ])('does not count %s', (_what, error) => {
    expect(isJobNoLongerHeld(error)).toBe(false);
  });
});
