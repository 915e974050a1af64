// Sends the push-fcm queue's jobs to Firebase Cloud Messaging (HTTP v1 API).
import { createFcmProvider } from '@operator/providers';
import { runPushWorker } from '@operator/push';

void runPushWorker('fcm', (credential) =>
  createFcmProvider({ serviceAccount: credential.serviceAccount, endpoint: credential.endpoint }),
);
