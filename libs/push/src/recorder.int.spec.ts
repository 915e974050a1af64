import { v7 as uuidv7 } from 'uuid';
import { closeDb, createDb, type Db } from '@operator/db';
import { settledWithin } from '@operator/testing';
import { createSendRecorder, type SendRecorder } from './outcomes';
import { silent } from './test/web-push-fixture';

// The worker's record of its sends against PostgreSQL: answers wait at most PUSH_RECORD_INTERVAL_MS
// to be written together, and no longer once no send of any job is waiting for its answer.

describe('send recorder (PostgreSQL)', () => {
  let db: Db;
  let recorder: SendRecorder;

  beforeAll(() => {
    db = createDb({ url: process.env.DATABASE_URL!, poolSize: 4 });
  });
  afterAll(() => closeDb(db));
  afterEach(() => recorder.close());

  const sent = (deliveryId: string) => ({ pushId: uuidv7(), outcome: { deliveryId, status: 'sent' as const, providerMessageId: null } });

  it('writes the answers as soon as no send of its jobs waits for one, not at the end of the interval', async () => {
    recorder = createSendRecorder({ db, log: silent, leaseMs: 60_000, flushMs: 60_000 });
    const [a, b, c] = [uuidv7(), uuidv7(), uuidv7()];
    recorder.hold(uuidv7(), [a, b]);
    recorder.hold(uuidv7(), [c]);
    // Two sends still wait for their answers: this one waits for them, or for the interval.
    const first = recorder.record([sent(a)]);
    expect(await settledWithin(first, 300)).toBe(false);
    const second = recorder.record([sent(b)]);
    expect(await settledWithin(second, 300)).toBe(false);
    // The last answer: nothing more would come, all three are written now.
    await Promise.all([first, second, recorder.record([sent(c)])]);
    expect(recorder.held).toBe(0);
  });
});
