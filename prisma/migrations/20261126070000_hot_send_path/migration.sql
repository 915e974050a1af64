-- Written by hand (a partial index and storage parameters, see "Changing the database schema" in README.md).

-- An update is HOT (a new row version on the same page, no index entry written) only when no
-- column an index reads changes, its predicate included, and the page has room. The index of open
-- deliveries named status in its predicate and updated_at in its key, so the claim, the renewals
-- and the record each wrote a row version elsewhere and an entry in every index of deliveries.
-- It now reads `open`, which changes once, when the delivery is final: the claim and its renewals
-- (status, claimed_at, attempts) stay HOT, and only the last record writes index entries.
-- Old rows keep open NULL (nothing is rewritten), and the open ones are marked now.
ALTER TABLE "deliveries" ADD COLUMN "open" BOOLEAN;
ALTER TABLE "deliveries" ALTER COLUMN "open" SET DEFAULT true;
UPDATE "deliveries" SET "open" = true WHERE "status" IN ('pending', 'sending');
DROP INDEX "deliveries_open_provider_updated_at_idx";
CREATE INDEX "deliveries_open_provider_updated_at_idx" ON "deliveries"("provider", "updated_at") WHERE "open";

-- Room on each page for the versions the send path writes: a delivery is claimed, then recorded,
-- and a message is settled, within seconds of their insert, while they still share a page.
ALTER TABLE "deliveries" SET (fillfactor = 50);
ALTER TABLE "messages" SET (fillfactor = 50);
