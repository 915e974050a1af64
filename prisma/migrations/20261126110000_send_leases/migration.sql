-- Written by hand (a GIN index with a storage parameter, see "Changing the database schema" in
-- docs/developing.md). No semicolon may appear in a comment here: the migration runner splits the
-- script at each one.

-- The claim of a send job: one row a job, not one update a delivery. While a lease on (provider,
-- push) is live, only its holder sends the deliveries of that push to that provider, and a worker
-- that dies leaves its leases to lapse. The deliveries themselves are written once a try, when its
-- outcome is known. How two jobs never both keep a push: libs/db/src/deliveries.ts, takeSendLease.
CREATE TABLE "send_leases" (
    "id" UUID NOT NULL,
    "provider" "Provider" NOT NULL,
    "push_ids" UUID[] NOT NULL,
    "taken_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
    "lease_until" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "send_leases_pkey" PRIMARY KEY ("id")
);

-- Which leases name a push. fastupdate off: with a pending list, every lookup would read the whole
-- list (up to gin_pending_list_limit) until a vacuum folds it in, and a lease is looked up far more
-- often than it is written.
CREATE INDEX "send_leases_push_ids_idx" ON "send_leases" USING GIN ("push_ids") WITH (fastupdate = off);
