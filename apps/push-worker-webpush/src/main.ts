// Sends the push-webpush queue's jobs to browsers' push services (RFC 8030, VAPID, aes128gcm).
import { createWebPushProvider } from '@operator/providers';
import { runPushWorker } from '@operator/push';

void runPushWorker('webpush', (credential) => createWebPushProvider({ vapid: credential.vapid }));
