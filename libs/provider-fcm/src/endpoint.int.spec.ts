import { randomUUID } from 'node:crypto';
import { FakeFcm, fcmToken, pushRequest } from '@operator/testing';
import { createFcmProvider } from './index';

// FCM_ENDPOINT: every connection (the OAuth2 grant and the HTTP/2 sends) goes to one https origin,
// while the requests still name Google's hosts (TLS server name and Host header or :authority).
describe('FCM endpoint override', () => {
  let fake: FakeFcm;

  beforeAll(async () => {
    fake = await FakeFcm.start();
  });

  afterAll(async () => {
    await fake.close();
  });

  it('sends the token grant and the messages to the endpoint, naming the real hosts', async () => {
    const provider = createFcmProvider({ serviceAccount: fake.serviceAccount, endpoint: `https://127.0.0.1:${fake.port}`, ca: fake.ca });
    const token = fcmToken();
    try {
      const [result] = await provider.send({ pushId: randomUUID(), request: pushRequest(7, 'player-1') }, [
        { deliveryId: randomUUID(), token, platform: 'android', p256dh: null, auth: null },
      ]);
      expect(result.ok).toBe(true);
    } finally {
      await provider.close();
    }
    expect(fake.tokenGrants.map((grant) => grant.status)).toEqual([200]);
    expect(fake.sendsTo(token).map((send) => [send.status, send.host, send.httpVersion])).toEqual([[200, 'fcm.googleapis.com', '2.0']]);
  });

  it('refuses an endpoint that is not https', () => {
    expect(() => createFcmProvider({ serviceAccount: fake.serviceAccount, endpoint: 'http://127.0.0.1:8443' })).toThrow(/https/);
  });
});
