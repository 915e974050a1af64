import type { PushRequest } from '@operator/contract';

// Contract fields into what each platform shows, shared by the providers: `aps` feeds APNs and FCM's
// apns block, the web notification Web Push and FCM's webpush block.

const TRUE_WORDS = new Set(['true', '1', 'yes', 'on']);
const FALSE_WORDS = new Set(['false', '0', 'no', 'off', '']);

export function flag(value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  const word = value.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  return undefined;
}

export function count(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d+\s*$/.test(value)) return undefined;
  return Number(value);
}

const UNIT_SECONDS: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86400 };

/** "3600", "3600s", "90m", "1h", "2d" in seconds. */
export function durationSeconds(value: string | undefined): number | undefined {
  const match = value?.trim().match(/^(\d+(?:\.\d+)?)\s*([smhd]?)$/i);
  if (!match) return undefined;
  return Math.round(Number(match[1]) * UNIT_SECONDS[match[2].toLowerCase()]);
}

/** Only defined values, so payloads stay small; built key by key because it runs several times a send. */
export function compact<T extends Record<string, unknown>>(value: T): Partial<T> {
  const defined: Record<string, unknown> = {};
  for (const key of Object.keys(value)) if (value[key] !== undefined) defined[key] = value[key];
  return defined as Partial<T>;
}

export interface Aps {
  alert: Record<string, unknown>;
  badge?: number;
  category?: string;
  'thread-id'?: string;
  'mutable-content'?: 1;
}

/** `aps`, and our keys beside it (image_url for a notification service extension). */
export function apnsPayload(
  request: PushRequest,
  pushId: string,
  trackingToken?: string,
): { aps: Aps; push_id: string; tracking_token?: string; image_url?: string } {
  const ios = request.ios ?? {};
  const alert = compact({
    title: request.title,
    body: request.body,
    subtitle: ios.sub_title,
    'loc-key': ios.loc_key,
    'loc-args': ios.loc_args,
    'title-loc-key': ios.title_loc_key,
    'title-loc-args': ios.title_loc_args,
    'subtitle-loc-key': ios.sub_title_loc_key,
    'subtitle-loc-args': ios.sub_title_loc_args,
    'action-loc-key': ios.action_loc_key,
    'launch-image': ios.launch_image,
  });
  const aps = compact({
    alert,
    badge: count(ios.badge),
    category: ios.category,
    'thread-id': ios.thread_id,
    'mutable-content': request.image_url ? (1 as const) : undefined,
  }) as Aps;
  return compact({ aps, push_id: pushId, tracking_token: trackingToken, image_url: request.image_url }) as {
    aps: Aps;
    push_id: string;
    tracking_token?: string;
    image_url?: string;
  };
}

export interface WebNotification {
  title: string;
  options: {
    body: string;
    icon?: string;
    badge?: string;
    image?: string;
    dir?: 'ltr' | 'rtl' | 'auto';
    lang?: string;
    renotify?: boolean;
    requireInteraction?: boolean;
    silent?: boolean;
    tag?: string;
    timestamp?: number;
    vibrate?: number[];
    data: { push_id: string; tracking_token?: string; link?: string };
  };
}

/** The contract's Unix timestamp in seconds, milliseconds accepted too. */
function epochMs(timestamp: number | undefined): number | undefined {
  if (timestamp === undefined) return undefined;
  return timestamp < 1e11 ? timestamp * 1000 : timestamp;
}

export function webNotification(request: PushRequest, pushId: string, trackingToken?: string): WebNotification {
  const web = request.web ?? {};
  const vibrate = web.vibrate?.map(Number).filter((ms) => Number.isFinite(ms) && ms >= 0);
  return {
    title: request.title,
    options: compact({
      body: request.body,
      icon: web.icon,
      badge: web.badge,
      image: request.image_url,
      dir: web.dir,
      lang: web.lang,
      renotify: flag(web.renotify),
      requireInteraction: flag(web.require_interaction),
      silent: flag(web.silent),
      tag: web.tag,
      timestamp: epochMs(web.timestamp),
      vibrate: vibrate?.length ? vibrate : undefined,
      data: compact({ push_id: pushId, tracking_token: trackingToken, link: web.link }),
    }) as WebNotification['options'],
  };
}
