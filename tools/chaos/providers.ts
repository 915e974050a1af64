// The five providers as local servers that speak the real protocols over TLS, and what each
// device received: every accepted send, by device and push id, with the time it arrived.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProviderName } from '@operator/contract';
import {
  FakeApns,
  FakeFcm,
  FakeHms,
  FakeOneSignal,
  FakePushService,
  apnsToken,
  fcmToken,
  hmsToken,
  oneSignalSubscriptionId,
  testTls,
  vapidKeys,
  type FakeApnsOptions,
  type FakeFcmOptions,
  type FakeHmsOptions,
  type FakeOneSignalOptions,
} from '@operator/testing';


/** A device as registered with the gateway; `key` is how the provider's server names it. */
export interface ChaosDevice {
  provider: ProviderName;
  key: string;
  registration: Record<string, unknown>;
}

/** One send a provider accepted for one device. */
export interface Receipt {
  provider: ProviderName;
  device: string;
  pushId: string | undefined;
  at: number;
}

export class Providers {
  private constructor(
    readonly fcm: FakeFcm,
    readonly apns: FakeApns,
    readonly webpush: FakePushService,
    readonly hms: FakeHms,
    readonly onesignal: FakeOneSignal,
    private readonly vapid: { publicKey: string; privateKey: string },
    private readonly dir: string,
  ) {}

  /** `options` make the servers behave otherwise (answer late, announce a stream limit). */
  static async start(
    dir: string,
    options: { fcm?: FakeFcmOptions; apns?: FakeApnsOptions; hms?: FakeHmsOptions; onesignal?: FakeOneSignalOptions } = {},
  ): Promise<Providers> {
    const vapid = vapidKeys();
    const [fcm, apns, webpush, hms, onesignal] = await Promise.all([
      FakeFcm.start(options.fcm),
      FakeApns.start(options.apns),
      FakePushService.start({ vapidPublicKey: vapid.publicKey }),
      FakeHms.start(options.hms),
      FakeOneSignal.start(options.onesignal),
    ]);
    return new Providers(fcm, apns, webpush, hms, onesignal, vapid, dir);
  }

  /**
   * What the push workers need to send to these servers (and trust their certificate), and what
   * lets the gateway register, and the Web Push worker send to, subscriptions on the local one.
   */
  workerEnv(): Record<string, string> {
    const serviceAccountFile = join(this.dir, 'fcm-service-account.json');
    writeFileSync(serviceAccountFile, JSON.stringify(this.fcm.serviceAccount));
    const apnsKeyFile = join(this.dir, 'apns-key.p8');
    writeFileSync(apnsKeyFile, this.apns.key);
    return {
      NODE_EXTRA_CA_CERTS: testTls().caFile,
      FCM_SERVICE_ACCOUNT_FILE: serviceAccountFile,
      FCM_ENDPOINT: `https://127.0.0.1:${this.fcm.port}`,
      APNS_KEY_FILE: apnsKeyFile,
      APNS_KEY_ID: this.apns.keyId,
      APNS_TEAM_ID: this.apns.teamId,
      APNS_TOPIC: 'com.example.chaos',
      APNS_HOST: this.apns.host,
      APNS_PORT: String(this.apns.port),
      VAPID_PUBLIC_KEY: this.vapid.publicKey,
      VAPID_PRIVATE_KEY: this.vapid.privateKey,
      VAPID_SUBJECT: 'mailto:chaos@example.test',
      WEBPUSH_ALLOWED_ORIGINS: this.webpush.origin,
      HMS_APP_ID: this.hms.appId,
      HMS_APP_SECRET: this.hms.appSecret,
      HMS_ENDPOINT: this.hms.origin,
      ONESIGNAL_APP_ID: this.onesignal.appId,
      ONESIGNAL_REST_API_KEY: this.onesignal.restApiKey,
      ONESIGNAL_ENDPOINT: this.onesignal.origin,
    };
  }

  newDevice(provider: ProviderName, userId: string, brandId: number, id: string): ChaosDevice {
    if (provider === 'fcm') {
      const token = fcmToken();
      return { provider, key: token, registration: { user_id: userId, brand_id: brandId, provider, platform: 'android', token } };
    }
    if (provider === 'apns') {
      const token = apnsToken();
      return { provider, key: token, registration: { user_id: userId, brand_id: brandId, provider, platform: 'ios', token } };
    }
    if (provider === 'hms') {
      const token = hmsToken();
      return { provider, key: token, registration: { user_id: userId, brand_id: brandId, provider, platform: 'android', token } };
    }
    if (provider === 'onesignal') {
      const token = oneSignalSubscriptionId();
      return { provider, key: token, registration: { user_id: userId, brand_id: brandId, provider, platform: 'ios', token } };
    }
    const subscription = this.webpush.subscription(id);
    return { provider, key: id, registration: { user_id: userId, brand_id: brandId, provider, platform: 'web', subscription } };
  }

  /** Every accepted send so far. */
  receipts(): Receipt[] {
    const out: Receipt[] = [];
    for (const send of this.fcm.requests) {
      if (send.status !== 200 || send.validateOnly || !send.token) continue;
      out.push({ provider: 'fcm', device: send.token, pushId: send.message?.data?.push_id, at: send.at });
    }
    for (const request of this.apns.requests) {
      if (request.status !== 200) continue;
      out.push({ provider: 'apns', device: request.token, pushId: (request.body as { push_id?: string } | undefined)?.push_id, at: request.at });
    }
    for (const message of this.webpush.received) {
      out.push({ provider: 'webpush', device: message.id, pushId: (message.payload as { push_id?: string } | undefined)?.push_id, at: message.at });
    }
    for (const delivery of this.hms.delivered) {
      out.push({ provider: 'hms', device: delivery.token, pushId: hmsPushId(delivery.message), at: delivery.at });
    }
    // What OneSignal took for each subscription: a request repeated with the same idempotency key is not a delivery.
    for (const delivery of this.onesignal.delivered) {
      out.push({ provider: 'onesignal', device: delivery.subscriptionId, pushId: delivery.pushId, at: delivery.request.at });
    }
    return out;
  }

  /** Sends the servers refused, by provider and reason (they should be none: every device is valid). */
  refusals(): Record<string, number> {
    const counts: Record<string, number> = {};
    const add = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
    for (const send of this.fcm.requests) if (send.status !== 200) add(`fcm ${send.status} ${send.reason}`);
    for (const grant of this.fcm.tokenGrants) if (grant.status !== 200) add(`fcm token ${grant.status} ${grant.reason}`);
    for (const request of this.apns.requests) if (request.status !== 200) add(`apns ${request.status} ${request.reason ?? ''}`);
    for (const request of this.webpush.requests) if (request.status < 200 || request.status >= 300) add(`webpush ${request.status} ${request.reason}`);
    for (const send of this.hms.requests) if (send.code !== '80000000') add(`hms ${send.status} ${send.code} ${send.reason}`);
    for (const grant of this.hms.tokenGrants) if (grant.status !== 200) add(`hms token ${grant.status} ${grant.reason}`);
    for (const request of this.onesignal.requests) if (request.status !== 200) add(`onesignal ${request.status} ${request.reason}`);
    return counts;
  }

  async close(): Promise<void> {
    await Promise.all([this.fcm.close(), this.apns.close(), this.webpush.close(), this.hms.close(), this.onesignal.close()]);
  }
}

/** The push id a Push Kit message carries in its data (a JSON string). */
function hmsPushId(message: Record<string, any>): string | undefined {
  try {
    return JSON.parse(String(message.data ?? message.android?.data ?? '{}')).push_id;
  } catch {
    return undefined;
  }
}
