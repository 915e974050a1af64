-- Written by hand (functions, see "Changing the database schema" in docs/developing.md). No
-- semicolon may appear in a comment here: the migration runner splits the script at each one.

-- The looks at send_leases by push, through its GIN index whatever the planner would otherwise
-- choose. Each job inserts a lease row and deletes it when done, so between two vacuums the table
-- holds thousands of dead rows of 100 push ids each, and without fresh statistics (or with
-- autovacuum off) the planner read all of them sequentially, comparing every array: 50-170 ms a
-- claim in the bench, against about 1 ms through the index. A function's SET applies to its own
-- statement only, so this holds behind PgBouncer in transaction mode too.

-- The pushes among `wanted` that another live send lease of `prov` names (see takeSendLease): a
-- lease that lapsed less than `grace_ms` ago still counts.
CREATE FUNCTION "send_lease_conflicts"("lease" UUID, "wanted" UUID[], "prov" "Provider", "grace_ms" DOUBLE PRECISION) RETURNS UUID[]
LANGUAGE sql VOLATILE SET enable_seqscan = off AS $$
  SELECT COALESCE(array_agg(DISTINCT h.id), '{}')
    FROM send_leases l CROSS JOIN LATERAL unnest(l.push_ids) AS h(id)
   WHERE l.push_ids && "wanted" AND l.provider = "prov" AND l.id <> "lease"
     AND l.lease_until > clock_timestamp() - "grace_ms" * interval '1 millisecond' AND h.id = ANY("wanted")
$$;

-- Whether a live send lease of `prov` names push `push` (a delivery being sent).
CREATE FUNCTION "send_lease_live"("push" UUID, "prov" "Provider") RETURNS BOOLEAN
LANGUAGE sql STABLE SET enable_seqscan = off AS $$
  SELECT EXISTS (SELECT 1 FROM send_leases l WHERE l.push_ids @> ARRAY["push"] AND l.provider = "prov" AND l.lease_until > now())
$$;
