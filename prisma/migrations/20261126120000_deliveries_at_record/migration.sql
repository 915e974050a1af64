-- Written by hand (a partial index, see "Changing the database schema" in docs/developing.md). No
-- semicolon may appear in a comment here: the migration runner splits the script at each one.

-- A push names the deliveries it is made of when it is accepted: their ids, devices and providers,
-- in the same order. A delivery row is written once a try, when its outcome is known (inserted,
-- or updated when an earlier try left it pending), not at acceptance. Pushes accepted before this
-- migration have no arrays (NULL) and their delivery rows as before, and are read as they were.
ALTER TABLE "messages" ADD COLUMN "delivery_ids" UUID[];
ALTER TABLE "messages" ADD COLUMN "device_ids" UUID[];
ALTER TABLE "messages" ADD COLUMN "providers" "Provider"[];

-- True until every delivery the push names has a final row, then NULL (a push is `sent` as soon as
-- one device took it, and may still have deliveries to send then). Pushes accepted before this
-- migration keep NULL: their delivery rows are in the index of open deliveries.
ALTER TABLE "messages" ADD COLUMN "open" BOOLEAN;
ALTER TABLE "messages" ALTER COLUMN "open" SET DEFAULT true;

-- The open pushes, by when they last moved, for the reconciler: a push whose job was lost before
-- one of its deliveries was tried has no delivery row to find it by.
CREATE INDEX "messages_open_updated_at_idx" ON "messages" ("updated_at") WHERE "open";
