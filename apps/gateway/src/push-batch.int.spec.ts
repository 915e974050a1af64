import { fcmToken, pushRequest, uniqueBrandId, uniqueName, webPushSubscription } from '@operator/testing';
import { Harness } from './test/harness';

type BatchBody = { successful: { id: number; push_id: string }[]; failed: { id: number | null; error: string }[]; fatal: { id: number; error: string }[] };

describe('POST /channels/push/batch', () => {
  let h: Harness;
  let brand: number;
  let androidPlayer: string;
  let webPlayer: string;

  beforeAll(async () => {
    h = await Harness.open({ BATCH_MAX_MESSAGES: '8', PUSH_JOB_MAX_MESSAGES: '2' });
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    brand = uniqueBrandId();
    androidPlayer = uniqueName('android');
    webPlayer = uniqueName('web');
    await h.registerDevice({ user_id: androidPlayer, brand_id: brand, provider: 'fcm', platform: 'android', token: fcmToken() });
    await h.registerDevice({ user_id: webPlayer, brand_id: brand, provider: 'webpush', subscription: webPushSubscription() });
  });

  it('sorts valid, invalid and unreachable messages into successful and failed, every array present', async () => {
    const valid = [pushRequest(brand, androidPlayer), pushRequest(brand, webPlayer), pushRequest(brand, androidPlayer)];
    const invalid = { ...pushRequest(brand, androidPlayer), title: 42 };
    const unreachable = pushRequest(brand, uniqueName('nobody'));
    const response = await h.batch([valid[0], invalid, valid[1], unreachable, valid[2], 'not a message']);

    expect(response.statusCode).toBe(200);
    const body = response.json() as BatchBody;
    expect(Object.keys(body).sort()).toEqual(['failed', 'fatal', 'successful']);
    expect(body.successful.map((s) => s.id).sort()).toEqual(valid.map((v) => v.activity.id).sort());
    expect(body.fatal).toEqual([]);
    expect(body.failed).toEqual(
      expect.arrayContaining([
        { id: invalid.activity.id, error: expect.stringMatching(/title must be a string/) },
        { id: unreachable.activity.id, error: expect.stringMatching(/no active device/) },
        { id: null, error: expect.stringMatching(/message 5: .*must be an object/) },
      ]),
    );
    expect(body.failed).toHaveLength(3);

    const rows = await h.messageRows(brand);
    expect(rows.map((r) => r.id).sort()).toEqual(body.successful.map((s) => s.push_id).sort());
  });

  it('answers an empty array with three empty arrays', async () => {
    const response = await h.batch([]);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ successful: [], failed: [], fatal: [] });
  });

  it('answers 400 when the body is not a JSON array', async () => {
    for (const body of [pushRequest(brand, androidPlayer), '"text"', '{"broken"']) {
      const response = await h.batch(body);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ error: expect.any(String), code: response.statusCode });
    }
  });

  it('leaves messages past BATCH_MAX_MESSAGES out of the answer so the CRM sends them again', async () => {
    const messages = Array.from({ length: 11 }, () => pushRequest(brand, androidPlayer));
    const response = await h.batch(messages);
    const body = response.json() as BatchBody;
    expect(body.successful.map((s) => s.id)).toEqual(messages.slice(0, 8).map((m) => m.activity.id));
    const answered = [...body.successful, ...body.failed, ...body.fatal].map((e) => e.id);
    for (const left of messages.slice(8)) expect(answered).not.toContain(left.activity.id);
    expect(await h.messageRows(brand)).toHaveLength(8);
  });

  it('queues a few jobs per provider (chunks of PUSH_JOB_MAX_MESSAGES), carrying push ids only', async () => {
    const messages = [...Array.from({ length: 5 }, () => pushRequest(brand, androidPlayer)), pushRequest(brand, webPlayer)];
    const body = (await h.batch(messages)).json() as BatchBody;
    const pushIds = new Set(body.successful.map((s) => s.push_id));
    expect(pushIds.size).toBe(6);

    const fcmJobs = (await h.jobs('fcm')).filter((job) => job.data.pushIds.some((id) => pushIds.has(id)));
    expect(fcmJobs.map((job) => job.data.pushIds.length).sort()).toEqual([1, 2, 2]);
    expect(new Set(fcmJobs.flatMap((job) => job.data.pushIds)).size).toBe(5);
    for (const job of fcmJobs) expect(Object.keys(job.data)).toEqual(['pushIds']);

    const webJobs = (await h.jobs('webpush')).filter((job) => job.data.pushIds.some((id) => pushIds.has(id)));
    expect(webJobs).toHaveLength(1);
    expect(webJobs[0].data.pushIds).toEqual([body.successful[5].push_id]);
  });

  it('answers a resent batch with the same push ids and stores and queues nothing more', async () => {
    const messages = Array.from({ length: 4 }, () => pushRequest(brand, androidPlayer));
    const first = (await h.batch(messages)).json() as BatchBody;
    const jobsBefore = (await h.jobs('fcm')).length;
    const again = (await h.batch([...messages, pushRequest(brand, androidPlayer)])).json() as BatchBody;

    for (const entry of first.successful) expect(again.successful).toContainEqual(entry);
    expect(again.successful).toHaveLength(5);
    expect(await h.messageRows(brand)).toHaveLength(5);
    expect((await h.jobs('fcm')).length).toBe(jobsBefore + 1);
  });

  it('answers the same message twice in one batch with one push_id', async () => {
    const message = pushRequest(brand, androidPlayer);
    const body = (await h.batch([message, message])).json() as BatchBody;
    expect(body.successful).toHaveLength(2);
    expect(body.successful[0]).toEqual(body.successful[1]);
    expect(await h.messageRows(brand)).toHaveLength(1);
  });

  it('stores each message once when identical batches race', async () => {
    const messages = Array.from({ length: 6 }, () => pushRequest(brand, androidPlayer));
    const responses = await Promise.all(Array.from({ length: 5 }, () => h.batch(messages)));
    const answers = responses.map((r) => r.json() as BatchBody);
    for (const answer of answers) {
      expect(answer.successful).toHaveLength(6);
      expect(answer.successful).toEqual(answers[0].successful);
    }
    expect(await h.messageRows(brand)).toHaveLength(6);
    const pushIds = new Set(answers[0].successful.map((s) => s.push_id));
    const jobs = (await h.jobs('fcm')).filter((job) => job.data.pushIds.some((id) => pushIds.has(id)));
    expect(jobs.flatMap((job) => job.data.pushIds).sort()).toEqual([...pushIds].sort());
  });

  describe('a message that cannot be stored right now', () => {
    afterEach(() => h.allowMessages());

    it('goes to fatal while the others are accepted, and is accepted when the CRM retries it', async () => {
      const messages = Array.from({ length: 4 }, () => pushRequest(brand, androidPlayer));
      const refused = messages[2].activity.id;
      // The database refuses this one row (as it would on a lock timeout or a failing disk page).
      await h.refuseMessage(refused);

      const jobsBefore = new Set((await h.jobs('fcm')).map((job) => job.id));
      const body = (await h.batch(messages)).json() as BatchBody;
      expect(body.fatal).toEqual([{ id: refused, error: expect.any(String) }]);
      expect(body.successful.map((s) => s.id).sort()).toEqual(messages.filter((m) => m.activity.id !== refused).map((m) => m.activity.id).sort());
      expect(body.failed).toEqual([]);
      const rows = await h.messageRows(brand);
      expect(rows).toHaveLength(3);
      // Every job queued refers to a stored message: the failed attempts left nothing behind.
      const newJobs = (await h.jobs('fcm')).filter((job) => !jobsBefore.has(job.id));
      expect(newJobs.flatMap((job) => job.data.pushIds).sort()).toEqual(rows.map((r) => r.id).sort());

      await h.allowMessages();
      const retry = (await h.batch(messages)).json() as BatchBody;
      expect(retry.successful).toHaveLength(4);
      expect(retry.fatal).toEqual([]);
      expect(await h.messageRows(brand)).toHaveLength(4);
    });
  });
});
