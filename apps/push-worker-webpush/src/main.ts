// Sends the push-webpush queue's jobs to browsers' push services (RFC 8030, VAPID, aes128gcm).
import { webpush } from '@operator/provider-webpush';
import { runPushWorker } from '@operator/push';

runPushWorker(webpush);
