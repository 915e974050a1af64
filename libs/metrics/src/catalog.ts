import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

// Every family this service reports, declared once; names and labels are a public interface. Each
// process registers the whole catalog, with samples for what that app does or reads.

export const registry = new Registry();

/** The families dashboards and alerts are written against. */
export const PUBLIC_FAMILIES = [
  'operator_http_request_duration_seconds',
  'operator_messages_accepted_total',
  'operator_sends_total',
  'operator_send_duration_seconds',
  'operator_push_suppressions_total',
  'operator_queue_jobs',
  'operator_outbox_pending_events',
  'operator_outbox_oldest_pending_seconds',
  'operator_dispatch_total',
  'operator_dead_letters',
  'operator_credits',
] as const;

collectDefaultMetrics({ register: registry });

const registers = [registry];

export const httpRequestDuration = new Histogram({
  name: 'operator_http_request_duration_seconds',
  help: 'Time the gateway took to answer a request, by method, route template (unmatched: no route took it) and status',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers,
});

export const messagesAccepted = new Counter({
  name: 'operator_messages_accepted_total',
  help: "Messages of push requests by what the gateway answered for each: accepted, duplicate (already accepted: its first push_id again), unreachable (no active device), invalid (refused as written, or to a brand its credential does not open), fatal (not stored: the CRM sends it again); and by brand: the message's brand when the configuration names it (a credential's @brands, BONUS_DEFAULT_BRAND), other for any other, none when unreadable",
  labelNames: ['mode', 'result', 'brand'] as const,
  registers,
});

export const sends = new Counter({
  name: 'operator_sends_total',
  help: 'Sends to one device by the push workers, by provider, outcome (sent, or the error class: dead-token, transient, auth, payload) and error code (none when sent)',
  labelNames: ['provider', 'outcome', 'error_code'] as const,
  registers,
});

export const sendDuration = new Histogram({
  name: 'operator_send_duration_seconds',
  help: "Time of one provider call (one push to the provider's devices of its player), by provider and outcome (sent when every device was sent to, else the error class of the first that was not)",
  labelNames: ['provider', 'outcome'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers,
});

export const pushSuppressions = new Counter({
  name: 'operator_push_suppressions_total',
  help: "Pushes a provider's worker did not send because the operator's records forbid it (the compliance gate), by provider, reason (excluded, blocked, no-consent, unverified: no answer within COMPLIANCE_MAX_WAIT) and brand (the brands the worker's configuration names, else other)",
  labelNames: ['provider', 'reason', 'brand'] as const,
  registers,
});

export const queueJobs = new Gauge({
  name: 'operator_queue_jobs',
  help: 'Send jobs in each BullMQ queue by state (waiting, active, delayed, failed)',
  labelNames: ['queue', 'state'] as const,
  registers,
});

export const outboxPendingEvents = new Gauge({
  name: 'operator_outbox_pending_events',
  help: 'Events in the outbox not yet delivered to the CRM (nor dead), by topic',
  labelNames: ['topic'] as const,
  registers,
});

export const outboxOldestPendingSeconds = new Gauge({
  name: 'operator_outbox_oldest_pending_seconds',
  help: 'Age of the oldest event waiting in the outbox, by topic (0 when none waits)',
  labelNames: ['topic'] as const,
  registers,
});

export const dispatches = new Counter({
  name: 'operator_dispatch_total',
  help: 'Posts of outbox events to the CRM by topic and result (delivered, retry: to be posted again, dead: moved to the dead letters)',
  labelNames: ['topic', 'result'] as const,
  registers,
});

export const deadLetters = new Gauge({
  name: 'operator_dead_letters',
  help: 'Events the CRM refused or that outlived WEBHOOK_MAX_AGE, waiting to be redriven',
  registers,
});
// Without labels a gauge starts with a sample of 0: an app that does not read the dead letters
// would report none. It has a sample once an app sets it.
deadLetters.remove();

export const credits = new Gauge({
  name: 'operator_credits',
  help: 'Credits by state (accepted: recorded and not carried out yet, completed, failed) and brand',
  labelNames: ['state', 'brand'] as const,
  registers,
});

export const storeReadFailures = new Counter({
  name: 'operator_metrics_store_read_failures_total',
  help: 'Readings of the store gauges (queue_jobs, outbox, dead_letters, credits) that failed or timed out; the gauges keep their last values meanwhile',
  labelNames: ['reading'] as const,
  registers,
});

export const METRICS_CONTENT_TYPE = registry.contentType;

export function metricsText(): Promise<string> {
  return registry.metrics();
}
