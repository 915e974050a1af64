import type { Android } from '@operator/contract';
import { compact, durationSeconds, type Notification } from '@operator/providers';

// The contract's push as one Push Kit message without its tokens: one body serves every batch.
// `data` is handed to the app when the notification is tapped, so push_id and tracking_token reach
// it whatever the click action.

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

export interface HmsMessage {
  data: string;
  android: HmsAndroidConfig;
}

export function hmsUrgency(priority: string | undefined): 'HIGH' | 'NORMAL' | undefined {
  const word = priority?.trim().toLowerCase();
  return word === 'high' ? 'HIGH' : word === 'normal' ? 'NORMAL' : undefined;
}

export function hmsTtl(value: string | undefined): string | undefined {
  const seconds = durationSeconds(value);
  return seconds === undefined ? undefined : `${Math.min(seconds, HMS_MAX_TTL_SECONDS)}s`;
}

/** Push Kit takes an integer -1..100 only; any other key is left out rather than failing the message. */
export function hmsCollapseKey(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*-?\d{1,3}\s*$/.test(value)) return undefined;
  const key = Number(value);
  return key >= -1 && key <= 100 ? key : undefined;
}

export function hmsColor(value: string | undefined): string | undefined {
  const match = value?.trim().match(/^#?([0-9a-fA-F]{6})$/);
  return match ? `#${match[1].toUpperCase()}` : undefined;
}

/** "/raw/<name>": an Android resource name has no extension, nor a folder. */
export function rawResource(value: string | undefined): string | undefined {
  const file = value?.trim().split('/').pop() ?? '';
  const name = file.replace(/\.[^.]*$/, '');
  return name ? `/raw/${name}` : undefined;
}

/** Push Kit shows only https images and pages; anything else is left out rather than failing the message. */
export function isHttpsUrl(value: string | undefined): boolean {
  if (!value) return false;
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

/** An https URL opens that page; another URI opens the app's activity for it; a plain word is an intent action. */
export function hmsClickAction(value: string | undefined): HmsClickAction {
  const action = value?.trim();
  if (!action) return { type: 3 };
  if (isHttpsUrl(action)) return { type: 2, url: action };
  if (/^[a-z][a-z0-9+.-]*:/i.test(action) && (action.includes('://') || /^intent:/i.test(action))) return { type: 1, intent: action };
  return { type: 1, action };
}

const nonEmpty = (list: string[] | undefined): string[] | undefined => (list && list.length > 0 ? list : undefined);

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

export function hmsSendBody(message: HmsMessage, tokens: readonly string[]): string {
  return JSON.stringify({ validate_only: false, message: { ...message, token: tokens } });
}
