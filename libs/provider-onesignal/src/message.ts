import type { PushRequest } from '@operator/contract';
import { compact, count, durationSeconds, type Notification } from '@operator/providers';

// The contract's push (2.1, 2.3-2.5) as OneSignal's create-notification fields. One request reaches
// every platform, so every platform's fields are set from the one push. The text goes under "en"
// whatever its language: OneSignal requires "en" and shows it where no other language matches.

/** OneSignal keeps a notification at most 28 days (its `ttl` maximum); longer TTLs are cut to it. */
export const ONESIGNAL_MAX_TTL_SECONDS = 28 * 24 * 3600;

/** OneSignal refuses a collapse_id longer than this. */
export const MAX_COLLAPSE_ID_LENGTH = 64;

/** What the create-notification body carries besides the app, the subscriptions and the idempotency key. */
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

/** The create-notification request body of one batch of subscriptions. */
export interface OneSignalRequestBody extends OneSignalContent {
  app_id: string;
  target_channel: 'push';
  include_subscription_ids: string[];
  idempotency_key: string;
}

/** "high" → 10 and "normal" → 5 (OneSignal's FCM priorities); anything else: left out (OneSignal's default applies). */
export function oneSignalPriority(value: string | undefined): 10 | 5 | undefined {
  const word = value?.trim().toLowerCase();
  if (word === 'high') return 10;
  if (word === 'normal') return 5;
  return undefined;
}

/** "ff0000" or "#FF0000" as OneSignal's opaque ARGB "FFFF0000"; not six hex digits: left out. */
export function argbColor(value: string | undefined): string | undefined {
  const match = value?.trim().match(/^#?([0-9a-fA-F]{6})$/);
  return match ? `FF${match[1].toUpperCase()}` : undefined;
}

/** A TTL from the contract ("3600", "3600s", "1h") in seconds, cut to OneSignal's 28 days. */
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

/** An image or icon a device can fetch (http or https); anything else is left out rather than failing the push. */
export const webUrl = (value: string | undefined) => urlWith(value, ['http:', 'https:']);

/** Browsers open only https links from a notification. */
export const httpsUrl = (value: string | undefined) => urlWith(value, ['https:']);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The contract's channel_id as `existing_android_channel_id` (the app's own), or `android_channel_id` when it is a dashboard UUID. */
export function androidChannel(channelId: string | undefined): Pick<OneSignalContent, 'android_channel_id' | 'existing_android_channel_id'> {
  if (!channelId) return {};
  return UUID.test(channelId) ? { android_channel_id: channelId } : { existing_android_channel_id: channelId };
}

/** Android sounds are raw resources named without their extension ("coins.wav" → "coins"); "default" is the default already. */
export function androidSound(value: string | undefined): string | undefined {
  const name = value?.trim().replace(/\.[A-Za-z0-9]{1,5}$/, '');
  return name && name.toLowerCase() !== 'default' ? name : undefined;
}

/** The iOS localisation keys, as the `alert` OneSignal passes to APNs in `apns_alert`. */
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

/** The push's fields, the same for every batch of its subscriptions. */
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
    // OneSignal's collapse_id replaces a shown notification with the same id (Android and iOS),
    // which is what FCM's tag does; a collapse key beyond its limit is left out, not refused.
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

/** The body of one create-notification request: the push's fields for these subscriptions, under this idempotency key. */
export function createNotificationBody(appId: string, content: OneSignalContent, subscriptionIds: string[], idempotencyKey: string): OneSignalRequestBody {
  return { app_id: appId, target_channel: 'push', include_subscription_ids: subscriptionIds, idempotency_key: idempotencyKey, ...content };
}
