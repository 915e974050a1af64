import type { ProviderInfo } from '@operator/providers';
import { fcmInfo } from '@operator/provider-fcm/descriptor';
import { apnsInfo } from '@operator/provider-apns/descriptor';
import { webPushInfo } from '@operator/provider-webpush/descriptor';
import { hmsInfo } from '@operator/provider-hms/descriptor';
import { oneSignalInfo } from '@operator/provider-onesignal/descriptor';

/**
 * Every provider, one entry each, in the order the API and the docs list them. An entry is the
 * light part of the provider's descriptor (no client, no SDK); its worker takes the whole one.
 */
export const PROVIDERS: readonly ProviderInfo<any>[] = [fcmInfo, apnsInfo, webPushInfo, hmsInfo, oneSignalInfo];

export const PROVIDER_NAMES: readonly string[] = PROVIDERS.map((provider) => provider.name);

export function providerInfo(name: string): ProviderInfo<any> {
  const info = PROVIDERS.find((provider) => provider.name === name);
  if (!info) throw new Error(`no provider ${name} in the registry`);
  return info;
}
