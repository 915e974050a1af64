// Nothing imported here: the bench and the fault suite read this file alone.

/**
 * SQL answering one row, `count`: the deliveries still to send, read through the indexes of open
 * pushes and open deliveries, so it stays cheap to poll while millions are queued. It counts every
 * delivery an open push names (a push stays open until each one is final: for a push of one device,
 * exactly its delivery still to send; for more, also those already done), and the delivery rows left
 * pending of pushes not open (accepted before pushes named their deliveries). It is 0 when, and only
 * when, nothing is left to send.
 */
export const DELIVERIES_TO_SEND_SQL = `SELECT (SELECT COALESCE(sum(cardinality(m.delivery_ids)), 0) FROM messages m WHERE m.open)
  + (SELECT count(*) FROM deliveries d
      WHERE d.open AND d.status IN ('pending', 'sending')
        AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = d.message_id AND m.accepted_on = d.accepted_on AND m.open)) AS count`;

/**
 * SQL answering one row, `started` and `done`: whether a send job has taken its pushes (a send
 * lease is live), and whether nothing is left to send. Both stop at the first row they find, so they
 * cost the same whatever is queued: what a loop polls while the work goes on. The open pushes and
 * deliveries, and the send leases, are read in their index's order (a scalar subquery: EXISTS would
 * drop the ORDER BY): a bitmap scan reads every entry the index still holds of rows closed since,
 * until a vacuum takes them out (40 ms a poll after 80,000 pushes), and a sequential scan every dead
 * lease (14 ms a poll in a second pass); an index scan steps over them and marks them dead, so that
 * the next poll does not read them again.
 */
export const SENDING_STATE_SQL = `SELECT (SELECT l.id FROM send_leases l ORDER BY l.id LIMIT 1) IS NOT NULL AS started,
  (SELECT m.updated_at FROM messages m WHERE m.open ORDER BY m.updated_at LIMIT 1) IS NULL
  AND (SELECT d.updated_at FROM deliveries d WHERE d.open AND d.status IN ('pending', 'sending') ORDER BY d.provider, d.updated_at LIMIT 1) IS NULL AS done`;
