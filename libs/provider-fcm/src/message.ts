import type * as messaging from 'firebase-admin/messaging';
import type { Android } from '@operator/contract';
import { apnsPayload, compact, durationSeconds, webNotification, type Notification } from '@operator/providers';

// The contract's push as one FCM v1 message in firebase-admin's types. All three platform blocks are
// always present: FCM applies the one that matches the token's device.

export type TokenMessage = messaging.TokenMessage;

export const FCM_MAX_TTL_SECONDS = 28 * 24 * 3600;

export function androidPriority(value: string | undefined): 'high' | 'normal' | undefined {
  const word = value?.trim().toLowerCase();
  return word === 'high' || word === 'normal' ? word : undefined;
}

export function rgbColor(value: string | undefined): string | undefined {
  const match = value?.trim().match(/^#?([0-9a-fA-F]{6})$/);
  return match ? `#${match[1].toLowerCase()}` : undefined;
}

export function androidTtlMs(value: string | undefined): number | undefined {
  const seconds = durationSeconds(value);
  return seconds === undefined ? undefined : Math.min(seconds, FCM_MAX_TTL_SECONDS) * 1000;
}

/** firebase-admin's own image URL check: an image it refuses is left out rather than failing the message. */
export function isFcmUrl(value: string | undefined): value is string {
  if (typeof value !== 'string' || /[^a-z0-9:/?#[\]@!$&'()*+,;=.\-_~%]/i.test(value)) return false;
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    const host = /^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*$/.test(url.hostname);
    if (!host && !/^\[[a-fA-F0-9:.]+\]$/.test(url.hostname)) return false;
    return url.pathname === '' || url.pathname === '/' || /^(\/[\w\-.~!$'()*+,;=:@%]+)*\/?$/.test(url.pathname);
  } catch {
    return false;
  }
}

/** FCM refuses a web notification's link that is not https. */
export function isHttpsUrl(value: string | undefined): value is string {
  if (!value) return false;
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

const orNothing = <T extends object>(value: T): T | undefined => (Object.keys(value).length > 0 ? value : undefined);
const nonEmpty = (list: string[] | undefined): string[] | undefined => (list && list.length > 0 ? list : undefined);

function androidNotification(android: Android, imageUrl: string | undefined): messaging.AndroidNotification {
  // Arguments without their key mean nothing to the device, and firebase-admin refuses them.
  const bodyLocKey = android.body_loc_key;
  const titleLocKey = android.title_loc_keys;
  return compact({
    icon: android.icon,
    color: rgbColor(android.color_rgb),
    sound: android.sound,
    tag: android.tag,
    clickAction: android.click_action,
    bodyLocKey,
    bodyLocArgs: bodyLocKey ? nonEmpty(android.body_loc_arcs) : undefined,
    titleLocKey,
    titleLocArgs: titleLocKey ? nonEmpty(android.title_loc_args) : undefined,
    channelId: android.channel_id,
    imageUrl,
  }) as messaging.AndroidNotification;
}

export function toFcmMessage(notification: Notification, token: string): TokenMessage {
  const { request, pushId, trackingToken } = notification;
  const data = compact({ push_id: pushId, tracking_token: trackingToken }) as Record<string, string>;
  const android: Android = request.android ?? {};
  const imageUrl = isFcmUrl(request.image_url) ? request.image_url : undefined;
  const web = webNotification(request, pushId, trackingToken);
  const link = request.web?.link;

  const androidConfig = compact({
    priority: androidPriority(android.priority),
    ttl: androidTtlMs(android.ttl),
    collapseKey: android.collapse_key,
    restrictedPackageName: android.restricted_package_name,
    notification: orNothing(androidNotification(android, imageUrl)),
  }) as messaging.AndroidConfig;

  const apnsConfig = compact({
    payload: apnsPayload(request, pushId, trackingToken) as unknown as messaging.ApnsPayload,
    fcmOptions: imageUrl ? { imageUrl } : undefined,
  }) as messaging.ApnsConfig;

  const webpushConfig = compact({
    notification: { title: web.title, ...web.options } as messaging.WebpushNotification,
    data,
    fcmOptions: isHttpsUrl(link) ? { link } : undefined,
  }) as messaging.WebpushConfig;

  return {
    token,
    notification: compact({ title: request.title, body: request.body, imageUrl }),
    data,
    android: androidConfig,
    apns: apnsConfig,
    webpush: webpushConfig,
  };
}

/** A google.protobuf.Duration in JSON ("1.5s"). */
export function fcmDuration(ms: number): string {
  return `${Math.round(ms) / 1000}s`;
}

/** The JSON FCM reads: proto3 takes the camelCase names, so only `imageUrl` and ttl differ. */
export function fcmWireMessage(message: TokenMessage): Record<string, unknown> {
  const { notification, android, apns } = message;
  const image = <T extends { imageUrl?: string }>(block: T) => {
    const { imageUrl, ...rest } = block;
    return imageUrl === undefined ? rest : { ...rest, image: imageUrl };
  };
  return {
    ...message,
    notification: notification && image(notification),
    android: android && {
      ...android,
      ttl: android.ttl === undefined ? undefined : fcmDuration(android.ttl),
      notification: android.notification && image(android.notification),
    },
    apns: apns && { ...apns, fcmOptions: apns.fcmOptions && image(apns.fcmOptions) },
  };
}
