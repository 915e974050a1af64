import { Type } from '@sinclair/typebox';
import { UUID_PATTERN } from './ids';
import { errorResponse } from './responses';

// Health probes and the webhook dead letters: for the orchestrator and the operator's back end.

const Probe = Type.Union([Type.Literal('up'), Type.Literal('down')]);

export const LiveSchema = Type.Object({ status: Type.Literal('ok') });

/** The Redis server a process is connected to: `redis` is down while it is a replica (it refuses writes). */
export const RedisServerSchema = Type.Object(
  {
    mode: Type.Union([Type.Literal('standalone'), Type.Literal('sentinel'), Type.Literal('cluster')]),
    role: Type.Union([Type.Literal('master'), Type.Literal('replica')]),
    address: Type.String({ description: "host:port of the server (a Cluster's masters, comma-separated)" }),
  },
  { description: 'Which Redis answered, and its role' },
);

/** A separate read server: reported, never a reason to be not ready (its reads go to the primary meanwhile). */
const ReadProbe = Type.Optional(
  Type.Union([Type.Literal('up'), Type.Literal('down')], { description: 'The replica of DATABASE_READ_URL, when set apart: reported only; while it is down its reads go to the primary' }),
);

/** Readiness on the public port (PORT): each store up or down, and nothing that names a server. */
export const ReadySchema = Type.Object({ status: Type.Literal('ready'), postgres: Probe, postgres_read: ReadProbe, redis: Probe });

export const NotReadySchema = errorResponse('Not ready: names the stores that do not answer (or the process is shedding load or closing)', {
  headers: { 'Retry-After': { type: 'integer', description: 'Seconds to wait before asking again' } },
});

/** Readiness on the operations port (METRICS_PORT): also which Redis server answered. */
export const ReadyDetailSchema = Type.Composite([ReadySchema, Type.Object({ redis_server: Type.Optional(RedisServerSchema) })]);

export const NotReadyDetailSchema = Type.Object(
  {
    error: Type.String(),
    code: Type.Optional(Type.Integer({ description: 'The HTTP status of the answer' })),
    postgres: Type.Optional(Probe),
    postgres_read: ReadProbe,
    redis: Type.Optional(Probe),
    redis_server: Type.Optional(RedisServerSchema),
  },
  { description: 'Not ready: names the store that does not answer (or the process is shedding load or closing)' },
);

export const DeadLetterListSchema = Type.Object({
  events: Type.Array(
    Type.Object({
      event_id: Type.String({ format: 'uuid' }),
      topic: Type.String(),
      push_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
      status: Type.String(),
      attempts: Type.Integer(),
      last_error: Type.Union([Type.String(), Type.Null()]),
      occurred_at: Type.String({ format: 'date-time' }),
    }),
  ),
});

export const RedriveSchema = Type.Object({
  event_ids: Type.Optional(
    Type.Array(Type.String({ pattern: UUID_PATTERN, errorMessage: 'must be an event id' }), { maxItems: 10000, description: 'Only these; every dead letter when absent' }),
  ),
});

export const RedrivenSchema = Type.Object({ redriven: Type.Integer({ description: 'Events sent again' }) });
