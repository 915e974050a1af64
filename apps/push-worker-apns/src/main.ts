// Sends the push-apns queue's jobs to Apple Push Notification service over HTTP/2 (token auth).
import { createApnsProvider } from '@operator/providers';
import { runPushWorker } from '@operator/push';

void runPushWorker('apns', (credential) => createApnsProvider(credential));
