// Sends the push-fcm queue's jobs to Firebase Cloud Messaging (HTTP v1 API).
import { fcm } from '@operator/provider-fcm';
import { runPushWorker } from '@operator/push';

runPushWorker(fcm);
