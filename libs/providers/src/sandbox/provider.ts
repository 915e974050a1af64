import { randomUUID } from 'node:crypto';
import type { ProviderName } from '@operator/contract';
import type { Notification, PushProvider, SendResult, SendTarget } from '../types';

export interface SandboxSend {
  provider: ProviderName;
  pushId: string;
  token: string;
  title: string;
}

/**
 * The development stand-in for a provider with no credentials: every send is accepted here, on
 * this machine, and reported as sent. Nothing leaves the process. Production refuses it.
 */
export function createSandboxProvider(name: ProviderName, onSend?: (send: SandboxSend) => void): PushProvider {
  return {
    name,
    async send(notification: Notification, targets: SendTarget[]): Promise<SendResult[]> {
      return targets.map((target) => {
        onSend?.({ provider: name, pushId: notification.pushId, token: target.token, title: notification.request.title });
        return { ok: true, providerMessageId: `sandbox-${randomUUID()}` };
      });
    },
    async close() {},
  };
}
