// Old rows for the benchmark: settled messages with their delivery and status event, exactly what
// retention drops, each in the partition of its day as the apps would have written it, so the hot
// paths are measured against a grown database. Set-based, so millions of rows take a minute or two.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { dayOf, makeDayPartitions } from './day-partitions.mjs';

/** None of the benchmark's own brands. */
export const OLD_ROWS_BRAND = 900_000_001;

const CHUNK = 250_000;

// A UUIDv7 (as the gateway makes) for the row's time, so old ids sort before new ones as they would.
const uuidV7 = (ms, seed) => `(lpad(to_hex(${ms}), 12, '0') || '7' || substr(md5(${seed}), 1, 3) || '8' || substr(md5(${seed}), 4, 15))::uuid`;

/** Then vacuums and analyzes, so measurements are not taken while autovacuum works through the tables. */
export async function seedOldRows(databaseUrl, { messages, rows, ageDays = 90 } = {}) {
  const n = messages ?? Math.ceil((rows ?? 0) / 3);
  const started = performance.now();
  if (!(n > 0)) return { messages: 0, deliveries: 0, events: 0, seconds: 0 };
  const connect = async () => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    // Nothing is lost if the server crashes mid-seed; the next run seeds again. A chunk may take
    // longer than the database's statement_timeout on a busy machine.
    await client.query('SET synchronous_commit = off');
    await client.query('SET statement_timeout = 0');
    return client;
  };
  const [a, b] = await Promise.all([connect(), connect()]);
  try {
    const salt = randomBytes(6).toString('hex');
    const {
      rows: [base],
    } = await a.query(
      `SELECT (SELECT COALESCE(max(crm_message_id), 0) FROM messages WHERE brand_id = $1)::text AS crm,
              (SELECT LEAST(COALESCE(min(seq), 1), 1) FROM events)::text AS seq,
              (SELECT LEAST(COALESCE(min(feed_seq), 1), 1) FROM events)::text AS feed,
              (extract(epoch FROM now() - ($2 + 30) * interval '1 day') * 1000)::bigint::text AS from_ms`,
      [OLD_ROWS_BRAND, ageDays],
    );
    const spanMs = 30 * 86_400_000;
    // Every day from the first message to the last event (900 ms after its message).
    const { skipped } = await makeDayPartitions(a, dayOf(Number(base.from_ms)), dayOf(Number(base.from_ms) + spanMs + 1000));
    if (skipped.length) console.warn(`seed-old-rows: ${skipped.join(', ')} not made (rows of their day in the default partition): their rows go there`);
    // Row i (1..n) was created at from_ms + i * step, in id order, like real traffic.
    const at = (i) => `(${base.from_ms}::bigint + (${i}::bigint * ${spanMs}::bigint / ${n}))`;
    const ts = (i, plusMs = 0) => `to_timestamp((${at(i)} + ${plusMs}) / 1000.0)`;
    // The UTC day of the ids' timestamp, as uuid_v7_day() reads it from them.
    const day = (i) => `(${ts(i)} AT TIME ZONE 'UTC')::date`;
    const messageId = (i) => uuidV7(at(i), `'${salt}m' || ${i}`);
    const deliveryId = (i) => uuidV7(at(i), `'${salt}d' || ${i}`);
    const failed = (i) => `(${i} % 20 = 0)`;
    const deviceId = (i) => `md5('old-device-' || ${i})::uuid`;
    const provider = (i) => `(CASE WHEN ${i} % 2 = 0 THEN 'fcm' ELSE 'apns' END)`;

    const chunks = [];
    for (let first = 1; first <= n; first += CHUNK) chunks.push([first, Math.min(n, first + CHUNK - 1)]);

    const insertMessages = ([first, last]) =>
      a.query(
        `INSERT INTO messages (id, accepted_on, brand_id, crm_message_id, user_id, activity_id, action_group_id, action_id, trigger_hash,
                               origin, payload, meta, crm_headers, status, error, created_at, updated_at,
                               delivery_ids, device_ids, providers, open)
         SELECT ${messageId('i')}, ${day('i')}, $1, $2::bigint + i, 'old-player-' || (i % 100000), 55, 2, 3, 'th-' || (i % 1000),
                NULL,
                json_build_object('activity', json_build_object('id', $2::bigint + i, 'brand_id', $1::bigint, 'user_id', 'old-player-' || (i % 100000),
                                  'activity_id', 55, 'action_group_id', 2, 'trigger_hash', 'th-' || (i % 1000), 'action_id', 3),
                                  'title', 'Weekend reload', 'body', '50 free spins are waiting', 'meta', json_build_object('campaign', 'old')),
                '{"campaign":"old"}'::json,
                jsonb_build_object('id', 'svc-' || i, 'activityid', '55', 'actionid', '3'),
                (CASE WHEN ${failed('i')} THEN 'failed' ELSE 'sent' END)::"MessageStatus",
                CASE WHEN ${failed('i')} THEN 'unregistered' END,
                ${ts('i')}, ${ts('i', 900)},
                ARRAY[${deliveryId('i')}], ARRAY[${deviceId('i')}], ARRAY[${provider('i')}], NULL
           FROM generate_series($3::bigint, $4::bigint) AS i`,
        [OLD_ROWS_BRAND, base.crm, first, last],
      );
    // The device was removed since: no device has its id.
    const insertDeliveries = ([first, last]) =>
      a.query(
        `INSERT INTO deliveries (id, accepted_on, message_id, device_id, provider, status, provider_message_id, error_code, error, attempts,
                                 sent_at, created_at, updated_at, open)
         SELECT ${deliveryId('i')}, ${day('i')}, ${messageId('i')}, ${deviceId('i')},
                ${provider('i')},
                (CASE WHEN ${failed('i')} THEN 'failed' ELSE 'sent' END)::"DeliveryStatus",
                CASE WHEN NOT ${failed('i')} THEN 'projects/old/messages/' || i END,
                CASE WHEN ${failed('i')} THEN 'unregistered' END,
                CASE WHEN ${failed('i')} THEN 'Requested entity was not found.' END,
                1,
                CASE WHEN NOT ${failed('i')} THEN ${ts('i', 800)} END, ${ts('i')}, ${ts('i', 800)}, NULL
           FROM generate_series($1::bigint, $2::bigint) AS i`,
        [first, last],
      );
    // Numbered below every event already there (seq and feed), as events of months ago would be.
    const insertEvents = ([first, last]) =>
      b.query(
        `INSERT INTO events (id, seq, feed_seq, topic, ordering_key, push_id, status, error, occurred_at)
         SELECT gen_random_uuid(), $1::bigint - $5::bigint - 1 + i, $2::bigint - $5::bigint - 1 + i, 'push.status',
                ${messageId('i')}::text, ${messageId('i')},
                CASE WHEN ${failed('i')} THEN 'failed' ELSE 'sent' END, CASE WHEN ${failed('i')} THEN 'unregistered' END,
                ${ts('i', 900)}
           FROM generate_series($3::bigint, $4::bigint) AS i`,
        [base.seq, base.feed, first, last, n],
      );

    // Messages, then their deliveries, on one connection; events on the other meanwhile.
    await Promise.all([
      (async () => {
        for (const chunk of chunks) await insertMessages(chunk);
        for (const chunk of chunks) await insertDeliveries(chunk);
      })(),
      (async () => {
        for (const chunk of chunks) await insertEvents(chunk);
      })(),
    ]);
    await Promise.all([a.query('VACUUM ANALYZE messages'), b.query('VACUUM ANALYZE events')]);
    await a.query('VACUUM ANALYZE deliveries');
    return { messages: n, deliveries: n, events: n, seconds: (performance.now() - started) / 1000 };
  } finally {
    await Promise.all([a.end(), b.end()]);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api';
  const rows = Number(process.argv[2] || 5_000_000);
  const result = await seedOldRows(url, { rows });
  console.log(`seeded ${result.messages} messages, ${result.deliveries} deliveries and ${result.events} events in ${result.seconds.toFixed(1)} s`);
}
