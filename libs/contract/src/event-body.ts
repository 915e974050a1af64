/**
 * A push status event as the store keeps it: the event, and the ids and meta of its message.
 * Ids are text (bigint columns), `meta` the CRM's raw JSON text or null.
 */
export interface PushEventSource {
  id: string;
  pushId: string;
  status: string;
  error: string | null;
  occurredAt: Date;
  meta: string | null;
  crmMessageId: string;
  brandId: string;
  userId: string;
  activityId: string;
  actionGroupId: string;
  actionId: string;
  triggerHash: string;
}

/**
 * The JSON body of a push status event, as text. `meta` is spliced in as the exact JSON the CRM
 * sent with the push, so it comes back byte for byte; a push sent without meta carries `{}`.
 */
export function pushEventBody(row: PushEventSource): string {
  const head = {
    event_id: row.id,
    push_id: row.pushId,
    status: row.status,
    timestamp: row.occurredAt.toISOString(),
    activity: {
      id: Number(row.crmMessageId),
      brand_id: Number(row.brandId),
      user_id: row.userId,
      activity_id: Number(row.activityId),
      action_group_id: Number(row.actionGroupId),
      action_id: Number(row.actionId),
      trigger_hash: row.triggerHash,
    },
    ...(row.error ? { error: row.error } : {}),
  };
  const json = JSON.stringify(head);
  return `${json.slice(0, -1)},"meta":${row.meta ?? '{}'}}`;
}
