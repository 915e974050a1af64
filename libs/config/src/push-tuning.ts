import { Type, type TInteger, type TOptional } from '@sinclair/typebox';
import { parseEnv, type Env } from './env';

// How hard a push worker drives its queue and its provider: one column per knob, one default row,
// and each provider's own values where it differs (its descriptor's `tuning`). A knob an operator
// may change has one environment variable for every provider. docs/operating.md, "Worker tuning".

export interface PushTuning {
  /** Send jobs one worker process runs at once. */
  workerConcurrency: number;
  /** Messages of one job sent at once. */
  parallelMessages: number;
  /** How long a send job's lease on its pushes lasts unrenewed before a crashed worker's sends are taken over. */
  claimLeaseMs: number;
  /** How often the worker looks for deliveries whose send job Redis lost. */
  reconcileIntervalMs: number;
  /** How long a delivery stays untouched before it is enqueued again. */
  reconcileAfterMs: number;
  /** Attempts of a send job before its remaining deliveries fail. */
  sendAttempts: number;
  /** Base of the exponential backoff between attempts. */
  sendBackoffMs: number;
  /** Sends in flight at once in one provider client; null: no cap but its connections'. */
  providerConcurrency: number | null;
  /** Connections one provider client opens at most: FCM and APNs per credential (HTTP/2), Web Push per push service origin. */
  providerConnections: number;
  /** How long one send waits for the provider's answer. */
  sendTimeoutMs: number;
  /** Messages per send job the reconciler enqueues. */
  jobMaxMessages: number;
  /** How long a job waits for messages it names to become visible in PostgreSQL. */
  visibilityGraceMs: number;
  /** BullMQ's lock on a running job. */
  lockDurationMs: number;
}

/** The row every provider runs with; a provider's descriptor names only the knobs where it differs. */
export const DEFAULT_TUNING: Readonly<PushTuning> = {
  workerConcurrency: 10,
  parallelMessages: 100,
  claimLeaseMs: 60000,
  reconcileIntervalMs: 30000,
  reconcileAfterMs: 300000,
  sendAttempts: 8,
  sendBackoffMs: 1000,
  providerConcurrency: null,
  providerConnections: 8,
  sendTimeoutMs: 15000,
  jobMaxMessages: 100,
  visibilityGraceMs: 30000,
  lockDurationMs: 30000,
};

/** The knobs a provider may set a default of its own for; every other knob has one default for all. */
export const PER_PROVIDER_KNOBS = ['providerConcurrency', 'providerConnections', 'sendTimeoutMs'] as const;
export type PerProviderKnob = (typeof PER_PROVIDER_KNOBS)[number];

/** A provider's row: the default row with its own values. */
export function tuningRow(own: Partial<Pick<PushTuning, PerProviderKnob>> = {}): PushTuning {
  return { ...DEFAULT_TUNING, ...own };
}

export type PushTuningKnob = keyof PushTuning;

/** A knob an operator sets through `variable` (an integer of at least `minimum`). */
export interface TunableKnob {
  variable: string;
  minimum: number;
  meaning: string;
}
/** A knob kept in the code (see why at each). */
export interface FixedKnob {
  fixed: true;
  meaning: string;
}

/** The table's columns: what each knob means and how it is set. */
export const PUSH_TUNING_KNOBS: Readonly<Record<PushTuningKnob, TunableKnob | FixedKnob>> = {
  workerConcurrency: { variable: 'PUSH_WORKER_CONCURRENCY', minimum: 1, meaning: 'Send jobs one worker process runs at once' },
  parallelMessages: {
    variable: 'PUSH_WORKER_PARALLEL_MESSAGES',
    minimum: 1,
    meaning: "Messages of one job handed to the provider client at once (its connections decide how many sends are on the wire)",
  },
  claimLeaseMs: {
    variable: 'PUSH_CLAIM_LEASE_MS',
    minimum: 1000,
    meaning: "How long a send job's lease on its pushes lasts unrenewed before a crashed worker's sends are taken over",
  },
  reconcileIntervalMs: { variable: 'PUSH_RECONCILE_INTERVAL_MS', minimum: 100, meaning: 'How often the worker looks for deliveries whose send job Redis lost' },
  reconcileAfterMs: {
    variable: 'PUSH_RECONCILE_AFTER_MS',
    minimum: 1000,
    meaning: 'How long a delivery stays untouched (pending, or claimed past its lease) before it is enqueued again',
  },
  sendAttempts: { variable: 'PUSH_SEND_ATTEMPTS', minimum: 1, meaning: 'Attempts of a send job before its remaining deliveries fail' },
  sendBackoffMs: { variable: 'PUSH_SEND_BACKOFF_MS', minimum: 1, meaning: 'Base of the exponential backoff between attempts (doubles each time, jittered)' },
  providerConcurrency: {
    variable: 'PUSH_PROVIDER_CONCURRENCY',
    minimum: 1,
    meaning: "Sends in flight at once: FCM and APNs across all of one credential's client (below what its connections take), Web Push within one message's send",
  },
  providerConnections: {
    variable: 'PUSH_PROVIDER_CONNECTIONS',
    minimum: 1,
    meaning: "Connections a provider client opens at most: FCM and APNs per credential, each carrying as many sends as the server's SETTINGS_MAX_CONCURRENT_STREAMS allows; Web Push per push service origin, one send each; HMS and OneSignal per credential (HTTP/1.1 keep-alive), one request at a time each",
  },
  sendTimeoutMs: { variable: 'PUSH_SEND_TIMEOUT_MS', minimum: 100, meaning: "How long one send waits for the provider's answer before it counts as a network failure (HTTP/1.1 providers: that long for a connection, then that long for the answer)" },
  // Not an operator's lever: only the jobs of deliveries Redis lost are sized here (the gateway sizes
  // every other job with PUSH_JOB_MAX_MESSAGES), and how many messages go out at once is
  // PUSH_WORKER_PARALLEL_MESSAGES.
  jobMaxMessages: { fixed: true, meaning: 'Messages per send job the reconciler enqueues (the gateway sizes its own with PUSH_JOB_MAX_MESSAGES)' },
  // It covers the gateway's commit, not the worker's load: shorter drops messages whose commit was
  // merely slow, longer only delays dropping those that were rolled back.
  visibilityGraceMs: { fixed: true, meaning: 'How long a job waits for the messages it names to become visible (the gateway adds jobs just before it commits)' },
  // Unsafe to shorten: BullMQ renews the lock every half of it while the event loop runs; one that
  // lapses under load marks the job stalled, and a job stalled twice fails (maxStalledCount 1).
  // Nothing gains from a longer one: a crashed worker's sends are taken over by the claim lease
  // and the reconciler, not by the lock.
  lockDurationMs: { fixed: true, meaning: "BullMQ's lock on a running job, renewed every half of it while the worker runs" },
};

function tunable(knob: PushTuningKnob): TunableKnob {
  const spec = PUSH_TUNING_KNOBS[knob];
  if (!('variable' in spec)) throw new Error(`${knob} has no environment variable`);
  return spec;
}

/** The schema field of a knob with one default for every worker (PushWorkerEnv, and PushSendEnv, which the gateway reads too). */
export function sharedTuningField(knob: PushTuningKnob): TInteger {
  const { minimum, meaning } = tunable(knob);
  const value = DEFAULT_TUNING[knob];
  if (typeof value !== 'number') throw new Error(`${knob} has no number in DEFAULT_TUNING`);
  return Type.Integer({ default: value, minimum, description: meaning });
}

/** The schema field of a knob whose default differs by provider: none here, each worker takes its own row's. */
function providerTuningField(knob: PushTuningKnob): TOptional<TInteger> {
  const { minimum, meaning } = tunable(knob);
  return Type.Optional(Type.Integer({ minimum, description: `${meaning} (default: the provider's, see docs/operating.md "Worker tuning")` }));
}

/** The variables with a default per provider (the shared ones are in PushWorkerEnv and PushSendEnv). */
export const PushProviderTuningEnv = Type.Object({
  PUSH_PROVIDER_CONCURRENCY: providerTuningField('providerConcurrency'),
  PUSH_PROVIDER_CONNECTIONS: providerTuningField('providerConnections'),
  PUSH_SEND_TIMEOUT_MS: providerTuningField('sendTimeoutMs'),
});

/** Every variable of the table (shared and per provider), none with a default: an unset one keeps the row's value. */
const PushTuningVariables = Type.Object(
  Object.fromEntries(
    (Object.keys(PUSH_TUNING_KNOBS) as PushTuningKnob[]).flatMap((knob) => {
      const spec = PUSH_TUNING_KNOBS[knob];
      return 'variable' in spec ? [[spec.variable, Type.Optional(Type.Integer({ minimum: spec.minimum }))]] : [];
    }),
  ),
);

/** `row` with the variables already parsed (parseEnv) applied: an unset one keeps the row's value. */
export function tuningOf(row: Readonly<PushTuning>, values: Readonly<Record<string, unknown>>): PushTuning {
  const tuning: PushTuning = { ...row };
  for (const knob of Object.keys(PUSH_TUNING_KNOBS) as PushTuningKnob[]) {
    const spec = PUSH_TUNING_KNOBS[knob];
    const value = 'variable' in spec ? values[spec.variable] : undefined;
    if (typeof value === 'number') tuning[knob] = value;
  }
  return tuning;
}

/** A provider's tuning from the environment: its row with the variables of `env` applied, every problem in one ConfigError. */
export function pushTuning(row: Readonly<PushTuning>, env: Env = process.env): PushTuning {
  return tuningOf(row, parseEnv(PushTuningVariables, env));
}
