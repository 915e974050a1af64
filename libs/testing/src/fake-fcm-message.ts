import { googleError } from './fake-fcm-answers';

/** A send FCM refuses: the status and Google's error body it answers. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    reason: string,
  ) {
    super(reason);
  }
}

const invalid = (message: string, field?: string) =>
  new Refusal(400, googleError(400, message, { fcmErrorCode: 'INVALID_ARGUMENT', field }), message);
const unknownName = (name: string, where: string) =>
  invalid(`Invalid JSON payload received. Unknown name "${name}" at '${where}': Cannot find field.`, where);

// The v1 Message resource (https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages).
// Like every Google JSON API (proto3 JSON), FCM accepts each field under its proto name
// (collapse_key) or its lowerCamelCase JSON name (collapseKey); firebase-admin sends a mix of both.
// 'struct' fields take any JSON object (apns.payload, webpush.notification); 'map' fields take
// string values only.
type Shape = { [protoName: string]: Shape | 'leaf' | 'map' | 'struct' };
const ANDROID_NOTIFICATION: Shape = Object.fromEntries(
  [
    'title', 'body', 'icon', 'color', 'sound', 'tag', 'click_action', 'body_loc_key', 'body_loc_args', 'title_loc_key',
    'title_loc_args', 'channel_id', 'ticker', 'sticky', 'event_time', 'local_only', 'notification_priority',
    'default_sound', 'default_vibrate_timings', 'default_light_settings', 'vibrate_timings', 'visibility',
    'notification_count', 'image', 'bypass_proxy_notification', 'proxy',
  ].map((name) => [name, 'leaf' as const]),
);
ANDROID_NOTIFICATION.light_settings = 'struct';
const MESSAGE_SHAPE: Shape = {
  name: 'leaf',
  data: 'map',
  notification: { title: 'leaf', body: 'leaf', image: 'leaf' },
  android: {
    collapse_key: 'leaf', priority: 'leaf', ttl: 'leaf', restricted_package_name: 'leaf', data: 'map',
    notification: ANDROID_NOTIFICATION, fcm_options: { analytics_label: 'leaf' },
    direct_boot_ok: 'leaf', bandwidth_constrained_ok: 'leaf', restricted_satellite_ok: 'leaf',
  },
  webpush: { headers: 'map', data: 'map', notification: 'struct', fcm_options: { link: 'leaf', analytics_label: 'leaf' } },
  apns: { headers: 'map', payload: 'struct', fcm_options: { analytics_label: 'leaf', image: 'leaf' }, live_activity_token: 'leaf' },
  fcm_options: { analytics_label: 'leaf' },
  token: 'leaf',
  topic: 'leaf',
  condition: 'leaf',
};
const camel = (protoName: string) => protoName.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

/** The message under FCM's proto field names, as FCM reads it; refuses what FCM's parser refuses. */
function normalize(value: unknown, shape: Shape, path: string): Record<string, any> {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid(`Invalid value at '${path}': must be an object`, path);
  const out: Record<string, any> = {};
  for (const [key, item] of Object.entries(value)) {
    const protoName = Object.keys(shape).find((name) => name === key || camel(name) === key);
    if (!protoName) throw unknownName(key, path);
    const where = `${path}.${protoName}`;
    if (protoName in out) throw invalid(`Invalid JSON payload received. Duplicate field "${protoName}" at '${path}'.`, where);
    const kind = shape[protoName];
    if (kind === 'map') {
      if (!item || typeof item !== 'object' || Array.isArray(item)) throw invalid(`Invalid value at '${where}': must be a map`, where);
      for (const [entry, text] of Object.entries(item)) {
        if (typeof text !== 'string') throw invalid(`Invalid value at '${where}[${entry}]' (TYPE_STRING), ${JSON.stringify(text)}`, `${where}[${entry}]`);
      }
      out[protoName] = item;
    } else if (kind === 'struct') {
      if (!item || typeof item !== 'object' || Array.isArray(item)) throw invalid(`Invalid value at '${where}' (type.googleapis.com/google.protobuf.Struct)`, where);
      out[protoName] = item;
    } else if (kind === 'leaf') {
      out[protoName] = item;
    } else {
      out[protoName] = normalize(item, kind, where);
    }
  }
  return out;
}

/** What FCM itself checks before accepting a message (the parts a client can get wrong). */
export function checkMessage(message: unknown, maxMessageBytes: number | undefined): Record<string, any> {
  const msg = normalize(message, MESSAGE_SHAPE, 'message');
  const targets = ['token', 'topic', 'condition'].filter((key) => msg[key] !== undefined);
  if (targets.length !== 1) throw invalid('Exactly one of token, topic or condition must be set.', 'message');
  if (msg.token !== undefined && (typeof msg.token !== 'string' || msg.token.trim() === '')) {
    throw invalid('The registration token is not a valid FCM registration token', 'message.token');
  }
  const android = msg.android ?? {};
  if (android.ttl !== undefined && !/^\d+(\.\d{1,9})?s$/.test(String(android.ttl))) {
    throw invalid(`Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), ${JSON.stringify(android.ttl)}`, 'message.android.ttl');
  }
  if (android.priority !== undefined && !/^(normal|high)$/i.test(String(android.priority))) {
    throw invalid(`Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), ${JSON.stringify(android.priority)}`, 'message.android.priority');
  }
  const color = android.notification?.color;
  if (color !== undefined && !/^#[0-9a-fA-F]{6}$/.test(String(color))) {
    throw invalid('Invalid color format. Color must be in the format #rrggbb', 'message.android.notification.color');
  }
  const link = msg.webpush?.fcm_options?.link;
  if (link !== undefined && !/^https:\/\//i.test(String(link))) {
    throw invalid('The link must be a valid HTTPS URL', 'message.webpush.fcm_options.link');
  }
  const aps = msg.apns?.payload?.aps;
  if (msg.apns?.payload !== undefined && (aps === null || (aps !== undefined && typeof aps !== 'object'))) {
    throw invalid('Invalid APNs payload', 'message.apns.payload');
  }
  if (maxMessageBytes !== undefined && Buffer.byteLength(JSON.stringify(msg)) > maxMessageBytes) {
    throw invalid('Message is too big', 'message');
  }
  return msg;
}
