import type { PushEventRow } from '@operator/db';
import { pushEventBody } from '@operator/contract';

/** What the CRM's conversion webhook counts. */
export type ConversionAction = 'delivered' | 'read' | 'clicked';

/** Which status counts as `delivered`: the provider accepting the push (`sent`) or the device reporting it. */
export type ConversionDeliveredOn = 'provider' | 'device';

/**
 * The body of the status webhook: our event (`event_id`, `push_id`, `status`, ..., `meta`), or the
 * CRM's conversion (`action`, `metadata`), one per engagement it counts.
 */
export type StatusWebhookFormat = { format: 'event' } | { format: 'conversion'; deliveredOn: ConversionDeliveredOn };

/** The conversion a push status stands for; undefined for statuses the CRM does not count (they stay in polling). */
export function conversionAction(status: string, deliveredOn: ConversionDeliveredOn): ConversionAction | undefined {
  switch (status) {
    case 'sent':
      return deliveredOn === 'provider' ? 'delivered' : undefined;
    case 'delivered':
      return deliveredOn === 'device' ? 'delivered' : undefined;
    case 'opened':
      return 'read';
    case 'clicked':
      return 'clicked';
    default:
      return undefined;
  }
}

/**
 * `{"action":...,"metadata":<meta>}` as text: the meta is spliced in as the exact JSON the CRM sent
 * with the push, so it comes back byte for byte. A push sent without meta carries `{}`: the CRM's
 * endpoint takes an object there, as the event body does.
 */
export function conversionBody(action: ConversionAction, meta: string | null): string {
  return `{"action":${JSON.stringify(action)},"metadata":${meta ?? '{}'}}`;
}

/** What the status webhook posts for a push event in `format`; null when that format posts nothing for its status. */
export function statusWebhookBody(format: StatusWebhookFormat, row: PushEventRow): string | null {
  if (format.format === 'event') return pushEventBody(row);
  const action = conversionAction(row.status, format.deliveredOn);
  return action ? conversionBody(action, row.meta) : null;
}
