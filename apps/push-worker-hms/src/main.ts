// Sends the push-hms queue's jobs to Huawei Push Kit (HMS Core push server API, OAuth 2.0 client credentials).
import { hms } from '@operator/provider-hms';
import { runPushWorker } from '@operator/push';

runPushWorker(hms);
