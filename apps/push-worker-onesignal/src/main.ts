// Sends the push-onesignal queue's jobs to OneSignal (REST API, create notification, idempotent requests).
import { onesignal } from '@operator/provider-onesignal';
import { runPushWorker } from '@operator/push';

runPushWorker(onesignal);
