// Nothing imported here: the bench and the fault suite read this file alone.

/**
 * SQL answering one row, `count`: the deliveries of the open pushes (a push stays open until each
 * of its deliveries is final), read through the index of open pushes, so it stays cheap to poll
 * while millions are queued. It is 0 when, and only when, nothing is left to send.
 */
export const DELIVERIES_TO_SEND_SQL = `SELECT (SELECT COALESCE(sum(cardinality(m.delivery_ids)), 0) FROM messages m WHERE m.open) AS count`;

/**
 * SQL answering one row, `started` and `done`: whether a send job has taken its pushes (a send
 * lease is live), and whether no push is left open. Each stops at the first row, in its index's
 * order (a scalar subquery: EXISTS would drop the ORDER BY), so a poll costs the same whatever is
 * queued and steps over the index entries of rows closed since, marking them dead.
 */
export const SENDING_STATE_SQL = `SELECT (SELECT l.id FROM send_leases l ORDER BY l.id LIMIT 1) IS NOT NULL AS started,
  (SELECT m.updated_at FROM messages m WHERE m.open ORDER BY m.updated_at LIMIT 1) IS NULL AS done`;
