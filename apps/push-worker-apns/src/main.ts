// Sends the push-apns queue's jobs to Apple Push Notification service over HTTP/2 (token auth).
import { apns } from '@operator/provider-apns';
import { runPushWorker } from '@operator/push';

runPushWorker(apns);
