// The processes of the stack, in start order. Each is bundled to dist/apps/<name>/main.js.
export const APPS = ['gateway', 'push-worker-fcm', 'push-worker-apns', 'push-worker-webpush', 'push-worker-hms', 'push-worker-onesignal', 'bonus', 'webhook-dispatcher'];
