import type { BrandSet } from '@operator/config';
import type { PushEventSource } from '@operator/contract';
import type { Sql } from './client';
import { LIVE_LEASE } from './claims';
import { daysOfIds } from './partitions';

// The push status feed (GET /channels/push/events) and the pushes' current state
// (GET /channels/push/status): reads only, so they work on a replica too.

/** The outbox topic of push status events. */
export const PUSH_STATUS_TOPIC = 'push.status';

/** A push status event with what the CRM needs: the push's activity ids and its meta as sent. */
export interface PushEventRow extends PushEventSource {
  /** Its position in the feed. */
  feedSeq: string;
}

export const PUSH_EVENT_COLUMNS = `e.id, e.feed_seq::text AS "feedSeq", e.push_id AS "pushId", e.status, e.error, e.occurred_at AS "occurredAt",
  m.meta::text AS meta, m.crm_message_id::text AS "crmMessageId", m.brand_id::text AS "brandId", m.user_id AS "userId",
  m.activity_id::text AS "activityId", m.action_group_id::text AS "actionGroupId", m.action_id::text AS "actionId",
  m.trigger_hash AS "triggerHash"`;

export interface PushFeedPage {
  rows: PushEventRow[];
  /** Committed events after these that wait for an older transaction, still running, to end. */
  held: boolean;
  /** Where the next page starts: the last event answered, or past other brands' events passed over. */
  next: string;
}

/** Events a page kept to some brands reads at most, so one that finds few of its own stays cheap. */
export const FEED_SCAN_ROWS = 2000;

const HORIZON = `SELECT events_feed_base(pg_snapshot_xmin(pg_current_snapshot())::text::bigint) AS horizon`;

/**
 * Push status events after `after` (a feed_seq), in feed order: only those of transactions older
 * than the snapshot's xmin, all ended, so no event can later appear before the last one answered.
 * Positions move up with each PostgreSQL timeline (events_feed_base()), so a failover never puts
 * new events behind a cursor. Reads only: it works on a replica.
 *
 * `brands` keeps the page to those brands' pushes (null: every brand); see readBrandsFeed.
 */
export async function readPushFeed(sql: Sql, after: bigint, limit: number, brands: BrandSet = null, scanRows = FEED_SCAN_ROWS): Promise<PushFeedPage> {
  if (brands !== null) return readBrandsFeed(sql, after, limit, brands, scanRows);
  const { rows } = await sql.query<PushEventRow & { final: boolean }>(
    `SELECT ${PUSH_EVENT_COLUMNS}, e.feed_seq < h.horizon AS final
       FROM events e JOIN messages m ON m.id = e.push_id AND m.accepted_on = uuid_v7_day(e.push_id)
            CROSS JOIN (${HORIZON}) h
      WHERE e.topic = $1 AND e.feed_seq > $2 ORDER BY e.feed_seq LIMIT $3`,
    [PUSH_STATUS_TOPIC, after.toString(), limit],
  );
  const held = rows.findIndex((row) => !row.final);
  const answered = held < 0 ? rows : rows.slice(0, held);
  const next = answered.length ? answered[answered.length - 1].feedSeq : after.toString();
  return { rows: answered.map(({ final: _final, ...row }) => row), held: held >= 0, next };
}

/**
 * The feed of some brands: at most `scanRows` events are read, of which the final ones of those
 * brands are answered, up to `limit`. When fewer are found the next page starts after the last
 * final event read, so other brands' events are passed over once and never read again. Final
 * events are a prefix of the feed (feed_seq below the horizon), so nothing is passed that could
 * still appear. One statement, so the page and where it ends come from one snapshot.
 */
async function readBrandsFeed(sql: Sql, after: bigint, limit: number, brands: readonly string[], scanRows: number): Promise<PushFeedPage> {
  const { rows } = await sql.query<PushEventRow & { lastFinal: string | null; held: boolean; position: string }>(
    `WITH h AS (${HORIZON}),
          scanned AS MATERIALIZED (
            SELECT e.id, e.occurred_at, e.feed_seq, m.id AS message_id, m.accepted_on,
                   e.feed_seq < h.horizon AS final, m.brand_id = ANY($4::bigint[]) AS own
              FROM events e JOIN messages m ON m.id = e.push_id AND m.accepted_on = uuid_v7_day(e.push_id) CROSS JOIN h
             WHERE e.topic = $1 AND e.feed_seq > $2 ORDER BY e.feed_seq LIMIT $5),
          picked AS (SELECT * FROM scanned WHERE final AND own ORDER BY feed_seq LIMIT $3),
          summary AS (SELECT max(feed_seq) FILTER (WHERE final)::text AS last_final, COALESCE(bool_or(NOT final), false) AS held FROM scanned)
     SELECT p.*, s.last_final AS "lastFinal", s.held
       FROM summary s
            LEFT JOIN LATERAL (
              SELECT ${PUSH_EVENT_COLUMNS}, k.feed_seq AS position
                FROM picked k JOIN events e ON e.id = k.id AND e.occurred_at = k.occurred_at
                     JOIN messages m ON m.id = k.message_id AND m.accepted_on = k.accepted_on) p ON true
      ORDER BY p.position`,
    [PUSH_STATUS_TOPIC, after.toString(), limit, brands, scanRows],
  );
  const { lastFinal, held } = rows[0];
  const answered = rows.filter((row) => row.id !== null).map(({ lastFinal: _l, held: _h, position: _p, ...row }) => row);
  const next = answered.length === limit ? answered[limit - 1].feedSeq : (lastFinal ?? after.toString());
  return { rows: answered, held, next };
}

export interface PushStatusRow {
  id: string;
  status: string;
  error: string | null;
  meta: string | null;
  createdAt: Date;
  updatedAt: Date;
  deliveries: { provider: string; status: string; error: string | null }[];
}

/**
 * The current state of the given pushes, with each delivery's (push_deliveries): a pending one under
 * a live send lease is being sent (see claimDeliveries). `brands` leaves out other brands' pushes
 * (null: every brand).
 */
export async function readPushStatus(sql: Sql, pushIds: string[], brands: BrandSet = null): Promise<PushStatusRow[]> {
  const { rows } = await sql.query<PushStatusRow>(
    `SELECT m.id, m.status::text AS status, m.error, m.meta::text AS meta, m.created_at AS "createdAt", m.updated_at AS "updatedAt",
            COALESCE((SELECT json_agg(json_build_object(
                                'provider', x.provider,
                                'status', CASE WHEN x.status = 'pending' AND ${LIVE_LEASE('m.id', 'x.provider')} THEN 'sending' ELSE x.status END,
                                'error', x.error_code) ORDER BY x.id)
                        FROM push_deliveries(ARRAY[m.id], ARRAY[m.accepted_on]) x), '[]') AS deliveries
       FROM messages m
      WHERE m.id = ANY($1::uuid[]) AND m.accepted_on = ANY($2::date[])${brands === null ? '' : ' AND m.brand_id = ANY($3::bigint[])'}`,
    brands === null ? [pushIds, daysOfIds(pushIds)] : [pushIds, daysOfIds(pushIds), brands],
  );
  return rows;
}

/** The push events of `ids` with their message's activity ids and meta. */
export async function pushEventRows(sql: Sql, ids: string[]): Promise<PushEventRow[]> {
  const { rows } = await sql.query<PushEventRow>(
    `SELECT ${PUSH_EVENT_COLUMNS} FROM events e JOIN messages m ON m.id = e.push_id AND m.accepted_on = uuid_v7_day(e.push_id) WHERE e.id = ANY($1::uuid[])`,
    [ids],
  );
  return rows;
}
