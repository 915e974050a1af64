-- Written by hand: Prisma's schema language cannot express a partial index (see the Delivery
-- model in schema.prisma and "Changing the database schema" in README.md).

-- Every delivery is written three times (accepted, claimed, recorded), and none of those updates
-- can be HOT (status changes), so each index costs a write each time. A push's deliveries are
-- found through (message_id, device_id), whose leading column is all the claim and the settlement
-- need: the provider and the status are filtered among a message's one or two rows.
DROP INDEX "deliveries_message_id_provider_status_idx";

-- The reconciler looks only at open deliveries: an index of those alone stays as small as the
-- work in flight, and a delivery leaves it when it is recorded.
DROP INDEX "deliveries_status_provider_updated_at_idx";
CREATE INDEX "deliveries_open_provider_updated_at_idx" ON "deliveries"("provider", "updated_at") WHERE "status" IN ('pending', 'sending');

-- The dispatcher's claim finds a key's first pending event through (ordering_key, seq) (see
-- claimEvents in libs/db/src/events.ts): no query uses this one.
DROP INDEX "events_pending_ordering_key_seq_idx";
