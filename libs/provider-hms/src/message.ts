import type { Android } from '@operator/contract';
import { compact, durationSeconds, type Notification } from '@operator/providers';

// The contract's push (2.1, 2.3) as one Push Kit message (HMS Core push server API v1), without
// its tokens: one body serves every batch of a send. Push Kit reads snake_case; `data` is one JSON
// string, handed to the app when the notification is tapped, so push_id and tracking_token reach it
// whatever the click action. restricted_package_name has no Push Kit field: left out.

/** Push Kit keeps an undelivered message at most 15 days. */
export const HMS_MAX_TTL_SECONDS = 15 * 24 * 3600;

export type HmsClickAction = { type: 1; intent: string } | { type: 1; action: string } | { type: 2; url: string } | { type: 3 };

export interface HmsAndroidNotification {
  title: string;
  body: string;
  image?: string;
  icon?: string;
  color?: string;
  sound?: string;
  default_sound?: true;
  tag?: string;
  channel_id?: string;
  click_action: HmsClickAction;
  body_loc_key?: string;
  body_loc_args?: string[];
  title_loc_key?: string;
  title_loc_args?: string[];
}

export interface HmsAndroidConfig {
  collapse_key?: number;
  urgency?: 'HIGH' | 'NORMAL';
  ttl?: string;
  notification: HmsAndroidNotification;
}

/** message.* of a send, all but `token`. */
export interface HmsMessage {
  data: string;
  android: HmsAndroidConfig;
}

/** "high"/"normal" (any case) as Push Kit's urgency; anything else: left out (Push Kit's NORMAL applies). */
export function hmsUrgency(priority: string | undefined): 'HIGH' | 'NORMAL' | undefined {
  const word = priority?.trim().toLowerCase();
  return word === 'high' ? 'HIGH' : word === 'normal' ? 'NORMAL' : undefined;
}

/** A TTL from the contract ("3600", "90m", "1h") as "<seconds>s", capped at 15 days; unreadable: left out. */
export function hmsTtl(value: string | undefined): string | undefined {
  const seconds = durationSeconds(value);
  return seconds === undefined ? undefined : `${Math.min(seconds, HMS_MAX_TTL_SECONDS)}s`;
}

/** Push Kit takes an integer -1..100 only; any other key (a word, as FCM takes) is left out rather than failing the message. */
export function hmsCollapseKey(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*-?\d{1,3}\s*$/.test(value)) return undefined;
  const key = Number(value);
  return key >= -1 && key <= 100 ? key : undefined;
}

/** "ff0000" or "#FF0000" as "#FF0000"; not six hex digits: left out. */
export function hmsColor(value: string | undefined): string | undefined {
  const match = value?.trim().match(/^#?([0-9a-fA-F]{6})$/);
  return match ? `#${match[1].toUpperCase()}` : undefined;
}

/** An icon or sound as Push Kit names it: "/raw/<name>" (an Android resource name has no extension, nor a folder). */
export function rawResource(value: string | undefined): string | undefined {
  const file = value?.trim().split('/').pop() ?? '';
  const name = file.replace(/\.[^.]*$/, '');
  return name ? `/raw/${name}` : undefined;
}

/** Push Kit shows only https images (and opens only https pages); anything else is left out rather than failing the message. */
export function isHttpsUrl(value: string | undefined): boolean {
  if (!value) return false;
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * The contract's click_action as Push Kit's: an https URL opens that page (type 2); another URI (a
 * deep link such as myapp://promo, an intent:// URI) opens the app's activity for it (type 1 intent,
 * which Android parses as Intent.parseUri); a plain word is an intent action (type 1 action); none: the
 * app's home page (type 3).
 */
export function hmsClickAction(value: string | undefined): HmsClickAction {
  const action = value?.trim();
  if (!action) return { type: 3 };
  if (isHttpsUrl(action)) return { type: 2, url: action };
  if (/^[a-z][a-z0-9+.-]*:/i.test(action) && (action.includes('://') || /^intent:/i.test(action))) return { type: 1, intent: action };
  return { type: 1, action };
}

const nonEmpty = (list: string[] | undefined): string[] | undefined => (list && list.length > 0 ? list : undefined);

/** The Push Kit message of a push, without its tokens. */
export function toHmsMessage(notification: Notification): HmsMessage {
  const { request, pushId, trackingToken } = notification;
  const android: Android = request.android ?? {};
  const sound = rawResource(android.sound);
  // Arguments without their key mean nothing to the device.
  const bodyLocKey = android.body_loc_key || undefined;
  const titleLocKey = android.title_loc_keys || undefined;
  const notificationBlock = compact({
    title: request.title,
    body: request.body,
    image: isHttpsUrl(request.image_url) ? request.image_url : undefined,
    icon: rawResource(android.icon),
    color: hmsColor(android.color_rgb),
    sound,
    // Without a sound of its own the notification rings as the phone's default does.
    default_sound: sound ? undefined : (true as const),
    tag: android.tag || undefined,
    channel_id: android.channel_id || undefined,
    click_action: hmsClickAction(android.click_action),
    body_loc_key: bodyLocKey,
    body_loc_args: bodyLocKey ? nonEmpty(android.body_loc_arcs) : undefined,
    title_loc_key: titleLocKey,
    title_loc_args: titleLocKey ? nonEmpty(android.title_loc_args) : undefined,
  }) as HmsAndroidNotification;
  const config = compact({
    collapse_key: hmsCollapseKey(android.collapse_key),
    urgency: hmsUrgency(android.priority),
    ttl: hmsTtl(android.ttl),
    notification: notificationBlock,
  }) as HmsAndroidConfig;
  return {
    data: JSON.stringify(compact({ push_id: pushId, tracking_token: trackingToken })),
    android: config,
  };
}

/** The body of one messages:send request: the message to these tokens (at most 1000). */
export function hmsSendBody(message: HmsMessage, tokens: readonly string[]): string {
  return JSON.stringify({ validate_only: false, message: { ...message, token: tokens } });
}
