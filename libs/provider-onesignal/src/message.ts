import type { PushRequest } from '@operator/contract';
import { compact, count, durationSeconds, type Notification } from '@operator/providers';

// The contract's push as OneSignal's fields, for every platform at once. The text goes under "en"
// whatever its language: OneSignal requires "en" and shows it where no other language matches.

/** OneSignal's `ttl` maximum (28 days); longer TTLs are cut to it. */
export const ONESIGNAL_MAX_TTL_SECONDS = 28 * 24 * 3600;

export const MAX_COLLAPSE_ID_LENGTH = 64;

export interface OneSignalContent {
  contents: { en: string };
  headings?: { en: string };
  subtitle?: { en: string };
  data: { push_id: string; tracking_token?: string };
  big_picture?: string;
  ios_attachments?: { image: string };
  chrome_web_image?: string;
  android_channel_id?: string;
  existing_android_channel_id?: string;
  priority?: 10 | 5;
  ttl?: number;
  collapse_id?: string;
  android_accent_color?: string;
  small_icon?: string;
  android_sound?: string;
  chrome_web_icon?: string;
  chrome_web_badge?: string;
  web_url?: string;
  web_push_topic?: string;
  ios_badgeType?: 'SetTo';
  ios_badgeCount?: number;
  ios_category?: string;
  thread_id?: string;
  apns_alert?: Record<string, unknown>;
}

export interface OneSignalRequestBody extends OneSignalContent {
  app_id: string;
  target_channel: 'push';
  include_subscription_ids: string[];
  idempotency_key: string;
}

/** OneSignal's FCM priorities; anything else is left out, for OneSignal's default. */
export function oneSignalPriority(value: string | undefined): 10 | 5 | undefined {
  const word = value?.trim().toLowerCase();
  if (word === 'high') return 10;
  if (word === 'normal') return 5;
  return undefined;
}

/** "#FF0000" as OneSignal's opaque ARGB "FFFF0000". */
export function argbColor(value: string | undefined): string | undefined {
  const match = value?.trim().match(/^#?([0-9a-fA-F]{6})$/);
  return match ? `FF${match[1].toUpperCase()}` : undefined;
}

export function oneSignalTtl(value: string | undefined): number | undefined {
  const seconds = durationSeconds(value);
  return seconds === undefined ? undefined : Math.min(seconds, ONESIGNAL_MAX_TTL_SECONDS);
}

function urlWith(value: string | undefined, protocols: string[]): string | undefined {
  if (!value) return undefined;
  try {
    return protocols.includes(new URL(value).protocol) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Anything but http(s) is left out rather than failing the push. */
export const webUrl = (value: string | undefined) => urlWith(value, ['http:', 'https:']);

/** Browsers open only https links from a notification. */
export const httpsUrl = (value: string | undefined) => urlWith(value, ['https:']);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A dashboard UUID is an `android_channel_id`; anything else is the app's own channel. */
export function androidChannel(channelId: string | undefined): Pick<OneSignalContent, 'android_channel_id' | 'existing_android_channel_id'> {
  if (!channelId) return {};
  return UUID.test(channelId) ? { android_channel_id: channelId } : { existing_android_channel_id: channelId };
}

/** Android sounds are raw resources named without their extension ("coins.wav" → "coins"). */
export function androidSound(value: string | undefined): string | undefined {
  const name = value?.trim().replace(/\.[A-Za-z0-9]{1,5}$/, '');
  return name && name.toLowerCase() !== 'default' ? name : undefined;
}

function apnsAlert(ios: NonNullable<PushRequest['ios']>): Record<string, unknown> | undefined {
  const alert = compact({
    'loc-key': ios.loc_key,
    'loc-args': ios.loc_key ? ios.loc_args : undefined,
    'title-loc-key': ios.title_loc_key,
    'title-loc-args': ios.title_loc_key ? ios.title_loc_args : undefined,
    'subtitle-loc-key': ios.sub_title_loc_key,
    'subtitle-loc-args': ios.sub_title_loc_key ? ios.sub_title_loc_args : undefined,
    'action-loc-key': ios.action_loc_key,
    'launch-image': ios.launch_image,
  });
  return Object.keys(alert).length > 0 ? alert : undefined;
}

export function toOneSignalContent(notification: Notification): OneSignalContent {
  const { request, pushId, trackingToken } = notification;
  const android = request.android ?? {};
  const ios = request.ios ?? {};
  const web = request.web ?? {};
  const image = webUrl(request.image_url);
  const badge = count(ios.badge);
  const collapseId = android.collapse_key ?? android.tag;
  return compact({
    contents: { en: request.body },
    headings: request.title ? { en: request.title } : undefined,
    subtitle: ios.sub_title ? { en: ios.sub_title } : undefined,
    data: compact({ push_id: pushId, tracking_token: trackingToken }) as OneSignalContent['data'],
    big_picture: image,
    ios_attachments: image ? { image } : undefined,
    chrome_web_image: image,
    ...androidChannel(android.channel_id),
    priority: oneSignalPriority(android.priority),
    ttl: oneSignalTtl(android.ttl),
    // As FCM's tag does; a collapse key beyond the limit is left out, not refused.
    collapse_id: collapseId && collapseId.length <= MAX_COLLAPSE_ID_LENGTH ? collapseId : undefined,
    android_accent_color: argbColor(android.color_rgb),
    small_icon: android.icon || undefined,
    android_sound: androidSound(android.sound),
    chrome_web_icon: webUrl(web.icon),
    chrome_web_badge: webUrl(web.badge),
    web_url: httpsUrl(web.link),
    web_push_topic: web.tag || undefined,
    ios_badgeType: badge === undefined ? undefined : ('SetTo' as const),
    ios_badgeCount: badge,
    ios_category: ios.category || undefined,
    thread_id: ios.thread_id || undefined,
    apns_alert: apnsAlert(ios),
  }) as OneSignalContent;
}

export function createNotificationBody(appId: string, content: OneSignalContent, subscriptionIds: string[], idempotencyKey: string): OneSignalRequestBody {
  return { app_id: appId, target_channel: 'push', include_subscription_ids: subscriptionIds, idempotency_key: idempotencyKey, ...content };
}
