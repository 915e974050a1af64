// Nothing imported here: the bench and the fault suite read this file alone.

/**
 * SQL answering one row, `count`: the deliveries still to send, of every push. They are the rows an
 * earlier try left pending, and the deliveries open pushes name that have no row yet (read through
 * the indexes of open deliveries and of open messages).
 */
export const DELIVERIES_TO_SEND_SQL = `SELECT (SELECT count(*) FROM deliveries WHERE open AND status IN ('pending', 'sending'))
  + (SELECT count(*) FROM messages m CROSS JOIN LATERAL unnest(m.delivery_ids) AS u(id)
      WHERE m.open AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = u.id AND d.accepted_on = m.accepted_on)) AS count`;
