-- Written by hand (functions, see "Changing the database schema" in docs/developing.md). No
-- semicolon may appear in a comment here: the migration runner splits the script at each one.

-- A provider's name is text: the registry of providers decides which names exist, and a new
-- provider needs no migration. A short text ('fcm') takes as many bytes as the enum's 4.
DROP FUNCTION "send_lease_conflicts"(UUID, UUID[], "Provider", DOUBLE PRECISION);
DROP FUNCTION "send_lease_live"(UUID, "Provider");

ALTER TABLE "devices" ALTER COLUMN "provider" TYPE TEXT USING "provider"::text;
ALTER TABLE "deliveries" ALTER COLUMN "provider" TYPE TEXT USING "provider"::text;
ALTER TABLE "send_leases" ALTER COLUMN "provider" TYPE TEXT USING "provider"::text;
ALTER TABLE "messages" ALTER COLUMN "providers" TYPE TEXT[] USING "providers"::text[];

DROP TYPE "Provider";

-- The pushes among `wanted` that another live send lease of `prov` names (see takeSendLease): a
-- lease that lapsed less than `grace_ms` ago still counts. Through the GIN index of send_leases.
CREATE FUNCTION "send_lease_conflicts"("lease" UUID, "wanted" UUID[], "prov" TEXT, "grace_ms" DOUBLE PRECISION) RETURNS UUID[]
LANGUAGE sql VOLATILE SET enable_seqscan = off AS $$
  SELECT COALESCE(array_agg(DISTINCT h.id), '{}')
    FROM send_leases l CROSS JOIN LATERAL unnest(l.push_ids) AS h(id)
   WHERE l.push_ids && "wanted" AND l.provider = "prov" AND l.id <> "lease"
     AND l.lease_until > clock_timestamp() - "grace_ms" * interval '1 millisecond' AND h.id = ANY("wanted")
$$;

-- Whether a live send lease of `prov` names push `push` (a delivery being sent).
CREATE FUNCTION "send_lease_live"("push" UUID, "prov" TEXT) RETURNS BOOLEAN
LANGUAGE sql STABLE SET enable_seqscan = off AS $$
  SELECT EXISTS (SELECT 1 FROM send_leases l WHERE l.push_ids @> ARRAY["push"] AND l.provider = "prov" AND l.lease_until > now())
$$;
