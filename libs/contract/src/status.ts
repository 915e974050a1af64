import { Type, type Static } from '@sinclair/typebox';

// What happened to each push (contract 1, 6): polled by the CRM, reported by the device. `meta` is
// the CRM's own JSON, answered byte for byte as it was sent, so these answers are written as text
// and the schemas describe them.

/** The most events one page of the feed answers. */
export const MAX_FEED_LIMIT = 1000;

const MESSAGE_STATUSES = ['accepted', 'sent', 'failed', 'delivered', 'opened', 'clicked'] as const;
const MessageStatus = Type.Union(MESSAGE_STATUSES.map((status) => Type.Literal(status)));
const Meta = Type.Record(Type.String(), Type.Unknown(), { description: 'The meta the CRM sent with the push, exactly as sent ({} when none)' });

export const PushStatusSchema = Type.Object(
  {
    push_id: Type.String({ format: 'uuid' }),
    status: MessageStatus,
    error: Type.Optional(Type.String({ description: 'Why the push failed' })),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    deliveries: Type.Array(
      Type.Object({
        provider: Type.String(),
        status: Type.Union([Type.Literal('pending'), Type.Literal('sending'), Type.Literal('sent'), Type.Literal('failed')]),
        error: Type.Union([Type.String({ description: "The provider's error code" }), Type.Null()]),
      }),
      { description: 'One per device of the player' },
    ),
    meta: Meta,
  },
  { $id: 'PushStatus' },
);
export type PushStatus = Static<typeof PushStatusSchema>;

export const PushStatusQuerySchema = Type.Object({
  push_id: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description: 'One or more push ids (the parameter repeated), at most 100' })),
});

export const PushStatusListSchema = Type.Object({
  pushes: Type.Array(PushStatusSchema),
  not_found: Type.Array(Type.String(), { description: 'The ids asked for that are no push' }),
});

export const PushFeedQuerySchema = Type.Object({
  after: Type.Optional(Type.String({ pattern: '^[0-9]{1,18}$', errorMessage: 'must be a cursor from an earlier answer', description: 'next_cursor of the previous page; from the start when absent' })),
  limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$', errorMessage: `must be a number from 1 to ${MAX_FEED_LIMIT}`, description: `Events per page, 1 to ${MAX_FEED_LIMIT} (100 when absent)` })),
});

export const PushEventSchema = Type.Object(
  {
    cursor: Type.String({ description: 'Position in the feed' }),
    event_id: Type.String({ format: 'uuid' }),
    push_id: Type.String({ format: 'uuid' }),
    status: MessageStatus,
    timestamp: Type.String({ format: 'date-time' }),
    activity: Type.Object({
      id: Type.Integer(),
      brand_id: Type.Integer(),
      user_id: Type.String(),
      activity_id: Type.Integer(),
      action_group_id: Type.Integer(),
      action_id: Type.Integer(),
      trigger_hash: Type.String(),
    }),
    error: Type.Optional(Type.String()),
    meta: Meta,
  },
  { $id: 'PushEvent' },
);

export const PushFeedSchema = Type.Object({
  events: Type.Array(PushEventSchema, { description: 'Status changes in the order they happened' }),
  next_cursor: Type.String({ description: 'Give it as `after` for the next page' }),
});

export const PushIdParamsSchema = Type.Object({ push_id: Type.String({ description: 'The push id the gateway answered' }) });

export const ENGAGEMENT_TYPES = ['delivered', 'opened', 'clicked'] as const;

export const EngagementSchema = Type.Object(
  {
    type: Type.Union(ENGAGEMENT_TYPES.map((type) => Type.Literal(type))),
    token: Type.String({ minLength: 1, maxLength: 128, description: "The push's tracking token, given to the device with the push" }),
  },
  { $id: 'Engagement' },
);
export type Engagement = Static<typeof EngagementSchema>;

export const EngagementRecordedSchema = Type.Object({
  push_id: Type.String({ format: 'uuid' }),
  status: Type.String({ description: `The push's status now: one of ${MESSAGE_STATUSES.join(', ')}` }),
  changed: Type.Boolean({ description: 'false when the push already had this status or a later one' }),
});
