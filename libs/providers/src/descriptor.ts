import type { EgressSettings, Logger, ProviderConfigPart, PushTuning, PushWorkerConfig } from '@operator/config';
import type { RegisterDevice } from '@operator/contract';
import type { ErrorCode, PushProvider } from './types';

/** What a provider's client is made with, beside its credential. */
export interface ProviderContext<C> {
  tuning: PushTuning;
  egress: EgressSettings;
  config: PushWorkerConfig<C>;
  log: Logger;
}

/**
 * The light part of a provider: what the gateway, the configuration and the tools read. It loads no
 * client and no SDK (libs/provider-<name>/src/descriptor.ts).
 */
export interface ProviderInfo<C = unknown> extends ProviderConfigPart<C> {
  /** Lower case, no dashes: the queue is `push-<name>`, the app `push-worker-<name>`. */
  name: string;
  /** How people write it: a column of the docs' tables. */
  title: string;
  /** What a device of this provider registers as its token (the API's description); none for a subscription. */
  token?: string;
  /** Why a device's registration is refused with 400, or null (after the checks every provider shares). */
  checkDevice(device: RegisterDevice): string | null;
}

/** A provider as one module: its light part, its error taxonomy and its client. */
export interface ProviderDescriptor<C = unknown> extends ProviderInfo<C> {
  /** The provider's own error codes (reasons, statuses) and the SendError code each becomes. */
  errors: Readonly<Record<string, ErrorCode>>;
  /** How the client classifies one of those codes alone: lets a spec hold `errors` to what the client does. */
  classify?(code: string): ErrorCode | undefined;
  /** The client of one credential. */
  create(credential: C, context: ProviderContext<C>): PushProvider;
}
