/** A push status event and its message's ids (text, of bigint columns) and raw `meta`. */
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

/** `meta` is spliced in as the exact JSON the CRM sent, so it comes back byte for byte. */
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
