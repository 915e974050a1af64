import { v7 as uuidv7 } from 'uuid';
import type { Sql } from './client';
import { IN_DAYS } from './delivery-shape';
import { daysOfIds } from './partitions';

export type DeliveryOutcome =
  | { deliveryId: string; status: 'sent'; providerMessageId: string | null }
  | { deliveryId: string; status: 'failed'; errorCode: string; error: string }
  /** Not sent this time; back to pending for the job's next attempt, with the reason kept. */
  | { deliveryId: string; status: 'pending'; errorCode: string; error: string };

export interface SettledMessage {
  id: string;
  status: 'sent' | 'failed';
  error: string | null;
}

/**
 * SQL: the outcomes of a statement's `o` as one jsonb object keyed by `key` (`o.id`, a delivery's
 * id), so that each row takes its outcome by a lookup of its id (OUTCOME_OF) and no join compares
 * every row with every outcome, whatever plan the statistics suggest.
 */
const OUTCOMES_BY = (key: string) =>
  `jsonb_object_agg(${key}, jsonb_build_object('status', o.status, 'provider_message_id', o.provider_message_id, 'error_code', o.error_code, 'error', o.error))`;

/** The outcome arrays of writeOutcomes' statement, all in the order of the push ids in $7. */
const OUTCOME_PARAM = { status: '$2', provider_message_id: '$3', error_code: '$4', error: '$5' } as const;

/**
 * SQL: a field of push `row`'s outcome, taken from the parameter arrays at the place of its id in
 * $7, which is sorted: width_bucket() finds it by binary search. The same guarantee as OUTCOME_OF
 * (no row compared with every outcome) without building a jsonb object of the batch and copying
 * a piece of it out for every field of every row.
 */
const AT_PUSH = (row: string, field: keyof typeof OUTCOME_PARAM) => `(${OUTCOME_PARAM[field]}::text[])[width_bucket(${row}.id, $7::uuid[])]`;

/** SQL: a field of the outcome of `row` (a delivery, or a push), looked up by its id in `outcomes` (from OUTCOMES_BY). */
const OUTCOME_OF = (outcomes: string, row: string, field: 'status' | 'provider_message_id' | 'error_code' | 'error') =>
  `(${outcomes} -> ${row}.id::text ->> '${field}')`;

/** A delivery row that takes an outcome: one not final yet, or a failed one that a late `sent` turns over. */
const STILL_OPEN = (row: string, outcomeStatus: string) => `(${row}.status = 'pending' OR (${outcomeStatus} = 'sent' AND ${row}.status <> 'sent'))`;

/**
 * SQL: a `push.status` event for each push of `pushes` (id, status, error) that `where` keeps, in id
 * order. Its id is the one at the push's place in `eventIds` (uuid[]), found by binary search in
 * `sortedPushIds` (uuid[], in PostgreSQL's order); the positions in the feed are reserved in one
 * call. uuid_v7() and each row's default position would cost PostgreSQL about 8 microseconds an
 * event.
 */
const STATUS_EVENTS = (pushes: string, where: string, sortedPushIds: string, eventIds: string) => `
       INSERT INTO events (id, feed_seq, topic, ordering_key, push_id, status, error)
       SELECT (${eventIds}::uuid[])[width_bucket(s.id, ${sortedPushIds}::uuid[])],
              (SELECT events_feed_positions(count(*)) FROM ${pushes} WHERE ${where}) + row_number() OVER (ORDER BY s.id) - 1,
              'push.status', s.id::text, s.id, s.status, s.error
         FROM ${pushes} s WHERE ${where} ORDER BY s.id`;

/**
 * Records what became of each claimed delivery (`pushIds`: the push of each) in one statement,
 * where its push keeps it: a push of one device on itself, settled in the same update (closed once
 * final, with its status event if still `accepted`); a push of several in the delivery's row, for
 * settleMessages to tally. Only a delivery not final takes an outcome, but a late `sent` wins over
 * a failed row. Found by key, in id order. Answers the pushes of one device that moved.
 */
export async function recordOutcomes(sql: Sql, outcomes: DeliveryOutcome[], pushIds: string[]): Promise<SettledMessage[]> {
  return (await writeOutcomes(sql, outcomes, pushIds)).settled;
}

/** What writeOutcomes did: the pushes of one device it moved, and the pushes of several whose rows changed (to settle). */
export interface WrittenOutcomes {
  settled: SettledMessage[];
  toSettle: string[];
}

/** recordOutcomes, answering also the pushes it leaves to settleMessages. */
export async function writeOutcomes(sql: Sql, outcomes: DeliveryOutcome[], pushIds: string[]): Promise<WrittenOutcomes> {
  if (!outcomes.length) return { settled: [], toSettle: [] };
  // In PostgreSQL's order of uuids (lower-case text sorts the same), for AT_PUSH's binary search.
  const chosen = oneOutcomeEach(outcomes, pushIds.map((id) => id.toLowerCase())).sort((a, b) => (a.pushId < b.pushId ? -1 : a.pushId > b.pushId ? 1 : 0));
  const pick = <T>(get: (outcome: DeliveryOutcome) => T) => chosen.map(({ outcome }) => get(outcome));
  const ON_PUSH = (field: keyof typeof OUTCOME_PARAM) => AT_PUSH('m', field);
  const ON_ROW = (field: Parameters<typeof OUTCOME_OF>[2]) => OUTCOME_OF('x.by_id', 'd', field);
  const { rows } = await sql.query<SettledMessage & { toSettle: boolean }>(
    `WITH o AS (
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $7::uuid[])
                  AS o(id, status, provider_message_id, error_code, error, push_id)),
     -- Read only when a push of several devices is among the outcomes.
     x AS MATERIALIZED (SELECT ${OUTCOMES_BY('o.id')} AS by_id FROM o),
     -- A push of one device: a status the device reported before the send was recorded stays.
     on_push AS (
       UPDATE messages m
          SET status = CASE WHEN m.status = 'accepted' AND ${ON_PUSH('status')} <> 'pending' THEN ${ON_PUSH('status')}::"MessageStatus" ELSE m.status END,
              error = CASE WHEN m.status <> 'accepted' THEN m.error WHEN ${ON_PUSH('status')} = 'failed' THEN ${ON_PUSH('error_code')} END,
              attempts = COALESCE(m.attempts, 0) + 1,
              provider_message_id = ${ON_PUSH('provider_message_id')}, error_code = ${ON_PUSH('error_code')}, error_detail = ${ON_PUSH('error')},
              sent_at = CASE WHEN ${ON_PUSH('status')} = 'sent' THEN now() END,
              open = CASE WHEN ${ON_PUSH('status')} = 'pending' THEN true END,
              updated_at = now()
        WHERE m.id = ANY(ARRAY(SELECT o.push_id FROM o)) AND ${IN_DAYS('m.accepted_on', '$6')} AND m.open AND cardinality(m.delivery_ids) = 1
       RETURNING m.id, m.status::text AS status, m.error),
     evented AS (${STATUS_EVENTS('on_push', "status IN ('sent', 'failed')", '$7', '$8')}),
     -- A push of several devices: the row an earlier try left.
     updated AS (
       UPDATE deliveries d
          SET status = ${ON_ROW('status')}::"DeliveryStatus",
              provider_message_id = COALESCE(${ON_ROW('provider_message_id')}, d.provider_message_id),
              error_code = ${ON_ROW('error_code')}, error = ${ON_ROW('error')},
              sent_at = CASE WHEN ${ON_ROW('status')} = 'sent' THEN now() ELSE d.sent_at END,
              attempts = d.attempts + 1, updated_at = now(), open = CASE WHEN ${ON_ROW('status')} = 'pending' THEN true END
         FROM x
        WHERE d.id = ANY(ARRAY(SELECT o.id FROM o WHERE o.push_id NOT IN (SELECT id FROM on_push))) AND ${IN_DAYS('d.accepted_on', '$6')}
          AND ${STILL_OPEN('d', ON_ROW('status'))}
       RETURNING d.id, d.message_id),
     -- Its first try: a row as its push names it. One another writer inserted meanwhile (a worker
     -- whose lease lapsed) takes the outcome by the same rule.
     fresh AS (
       SELECT o.*, u.device_id, u.provider, m.accepted_on
         FROM o CROSS JOIN LATERAL (
           SELECT m.accepted_on, m.delivery_ids, m.device_ids, m.providers FROM messages m
            WHERE m.id = o.push_id AND ${IN_DAYS('m.accepted_on', '$6')} AND cardinality(m.delivery_ids) > 1 OFFSET 0) m
        CROSS JOIN LATERAL unnest(m.delivery_ids, m.device_ids, m.providers) AS u(id, device_id, provider)
        WHERE u.id = o.id AND o.push_id NOT IN (SELECT id FROM on_push) AND o.id NOT IN (SELECT id FROM updated)),
     inserted AS (
       INSERT INTO deliveries AS d (id, accepted_on, message_id, device_id, provider, status, provider_message_id, error_code, error,
                                    attempts, sent_at, open)
       SELECT f.id, f.accepted_on, f.push_id, f.device_id, f.provider, f.status::"DeliveryStatus", f.provider_message_id, f.error_code, f.error,
              1, CASE WHEN f.status = 'sent' THEN now() END, CASE WHEN f.status = 'pending' THEN true END
         FROM fresh f ORDER BY f.id
       ON CONFLICT (message_id, device_id, accepted_on) DO UPDATE
          SET status = EXCLUDED.status,
              provider_message_id = COALESCE(EXCLUDED.provider_message_id, d.provider_message_id),
              error_code = EXCLUDED.error_code, error = EXCLUDED.error,
              sent_at = CASE WHEN EXCLUDED.status = 'sent' THEN now() ELSE d.sent_at END,
              attempts = d.attempts + 1, updated_at = now(), open = EXCLUDED.open
        WHERE ${STILL_OPEN('d', 'EXCLUDED.status')}
       RETURNING d.message_id)
     SELECT id, status, error, false AS "toSettle" FROM on_push WHERE status IN ('sent', 'failed')
     UNION ALL
     SELECT DISTINCT w.message_id, NULL, NULL, true FROM (SELECT message_id FROM updated UNION ALL SELECT message_id FROM inserted) w`,
    [
      pick((o) => o.deliveryId),
      pick((o) => o.status),
      pick((o) => (o.status === 'sent' ? o.providerMessageId : null)),
      pick((o) => (o.status === 'sent' ? null : o.errorCode)),
      pick((o) => (o.status === 'sent' ? null : o.error.slice(0, 1000))),
      daysOfIds(pushIds),
      chosen.map(({ pushId }) => pushId),
      chosen.map(() => uuidv7()),
    ],
  );
  const settled = rows.filter((row) => !row.toSettle).map(({ toSettle: _toSettle, ...row }) => row);
  return { settled, toSettle: rows.filter((row) => row.toSettle).map((row) => row.id) };
}

/** One outcome a delivery, with its push: a sent one if any, else the last. */
function oneOutcomeEach(outcomes: DeliveryOutcome[], pushIds: string[]): { outcome: DeliveryOutcome; pushId: string }[] {
  const byDelivery = new Map<string, { outcome: DeliveryOutcome; pushId: string }>();
  outcomes.forEach((outcome, i) => {
    const kept = byDelivery.get(outcome.deliveryId);
    if (!kept || kept.outcome.status !== 'sent') byDelivery.set(outcome.deliveryId, { outcome, pushId: pushIds[i] });
  });
  return [...byDelivery.values()];
}

/** Devices whose token the provider declared dead: they get no more pushes until registered again. */
export async function deactivateDevices(sql: Sql, devices: { id: string; reason: string }[]): Promise<void> {
  if (!devices.length) return;
  await sql.query(
    `UPDATE devices d SET active = false, deactivated_at = now(), deactivated_reason = r.reason, updated_at = now()
       FROM unnest($1::uuid[], $2::text[]) AS r(id, reason)
      WHERE d.id = r.id AND d.active`,
    [devices.map((d) => d.id), devices.map((d) => d.reason)],
  );
}

/**
 * Locks, in id order, the pushes of several devices among these still to be settled or closed, and
 * answers their ids: the settlement after it in the same transaction then sees every delivery
 * another writer recorded before. A push of one device needs no lock: recordOutcomes settled it in
 * the write that waited for any other writer.
 */
export async function lockMessages(sql: Sql, pushIds: string[]): Promise<string[]> {
  if (!pushIds.length) return [];
  const { rows } = await sql.query<{ id: string }>(
    `SELECT m.id FROM messages m
      WHERE m.id = ANY(ARRAY(SELECT unnest($1::uuid[]))) AND ${IN_DAYS('m.accepted_on', '$2')} AND (m.status::text = 'accepted' OR m.open)
        AND cardinality(m.delivery_ids) > 1
      ORDER BY m.id FOR NO KEY UPDATE`,
    [pushIds, daysOfIds(pushIds)],
  );
  return rows.map((row) => row.id);
}

/** SQL: a figure of push `m`'s tally in settleMessages (`errors`: text; the counts: bigint), looked up by its id. */
const TALLY = (field: 'sent' | 'final' | 'named' | 'errors') => `(x.by_push -> m.id::text ->> '${field}')${field === 'errors' ? '' : '::bigint'}`;

/**
 * Moves accepted pushes forward from their deliveries (push_deliveries): `sent` once one device took
 * it, `failed` (with the reasons: the suppressions alone when the compliance gate kept any device
 * from it) once every delivery is final and none was sent, each with its
 * status event (the outbox); closes a push (open null, out of the reconciler's index) once every
 * delivery is final. Answers the pushes that moved; one already moved on is left alone. Pushes are
 * found by key, and each takes its tally by a lookup of its id (see OUTCOMES_BY).
 */
export async function settleMessages(sql: Sql, pushIds: string[]): Promise<SettledMessage[]> {
  if (!pushIds.length) return [];
  // In PostgreSQL's order of uuids, for the binary search that gives each push its event's id.
  const sorted = [...new Set(pushIds.map((id) => id.toLowerCase()))].sort();
  const { rows } = await sql.query<SettledMessage>(
    `WITH tally AS (
       SELECT x.message_id, count(*) FILTER (WHERE x.status = 'sent') AS sent, count(*) FILTER (WHERE x.status <> 'pending') AS final,
              count(*) AS named,
              -- A suppression is the answer the CRM needs: it names the push's error alone.
              COALESCE(string_agg(DISTINCT x.error_code, ', ' ORDER BY x.error_code) FILTER (WHERE x.error_code LIKE 'suppressed:%'),
                       string_agg(DISTINCT x.error_code, ', ' ORDER BY x.error_code)) AS errors
         FROM push_deliveries($1::uuid[], $2::date[]) x
        GROUP BY x.message_id HAVING count(*) FILTER (WHERE x.status <> 'pending') > 0),
     x AS MATERIALIZED (
       SELECT jsonb_object_agg(message_id, jsonb_build_object('sent', sent, 'final', final, 'named', named, 'errors', errors)) AS by_push FROM tally),
     moved AS (
       UPDATE messages m
          SET status = CASE WHEN ${TALLY('sent')} > 0 THEN 'sent' ELSE 'failed' END::"MessageStatus",
              error = CASE WHEN ${TALLY('sent')} > 0 THEN NULL ELSE ${TALLY('errors')} END,
              open = CASE WHEN ${TALLY('final')} = ${TALLY('named')} THEN NULL ELSE m.open END,
              updated_at = now()
         FROM x
        WHERE m.id = ANY(ARRAY(SELECT message_id FROM tally)) AND ${IN_DAYS('m.accepted_on', '$2')}
          AND m.status = 'accepted' AND (${TALLY('sent')} > 0 OR ${TALLY('final')} = ${TALLY('named')})
        RETURNING m.id, m.status::text AS status, m.error),
     closed AS (
       UPDATE messages m SET open = NULL, updated_at = now()
         FROM x
        WHERE m.id = ANY(ARRAY(SELECT message_id FROM tally)) AND ${IN_DAYS('m.accepted_on', '$2')}
          AND m.open AND ${TALLY('final')} = ${TALLY('named')} AND m.id NOT IN (SELECT id FROM moved)),
     evented AS (${STATUS_EVENTS('moved', 'true', '$1', '$3')})
     SELECT id, status, error FROM moved`,
    [sorted, daysOfIds(sorted), sorted.map(() => uuidv7())],
  );
  return rows;
}
