import { fcmToken, pushRequest, uniqueBrandId, uniqueName } from '@operator/testing';
import { Harness } from './test/harness';

// Needs PostgreSQL and Redis. In the seconds around a failover a connection can land on a node
// that is still read-only: every write fails with 25006. The CRM must be told to send again (503),
// never that its messages failed (`fatal` in a batch answer).
describe('a gateway whose PostgreSQL is read-only', () => {
  let writable: Harness;
  let readOnly: Harness;

  beforeAll(async () => {
    writable = await Harness.open();
    const url = new URL(process.env.DATABASE_URL!);
    url.searchParams.set('options', '-c default_transaction_read_only=on');
    readOnly = await Harness.open({ DATABASE_URL: url.toString() });
  });
  afterAll(async () => {
    await readOnly.close();
    await writable.close();
  });

  it('answers 503 with Retry-After to a batch, a single and a device registration, and stores nothing', async () => {
    const brand = uniqueBrandId();
    const player = uniqueName('player');
    await writable.registerDevice({ user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() });
    const batch = Array.from({ length: 64 }, () => pushRequest(brand, player));

    for (const response of [
      await readOnly.batch(batch),
      await readOnly.single(pushRequest(brand, player)),
      await readOnly.internal('POST', '/v1/devices', { user_id: player, brand_id: brand, provider: 'fcm', token: fcmToken() }),
    ]) {
      expect(response.statusCode).toBe(503);
      expect(response.headers['retry-after']).toBeDefined();
    }
    expect(await writable.messageRows(brand)).toEqual([]);
  });
});
