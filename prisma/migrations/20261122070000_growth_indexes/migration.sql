-- No query reads these: the feed and the dispatcher go from an event to its message by the primary
-- key of messages, never from a push id to its events, and nothing lists the messages of a player.
-- DropIndex
DROP INDEX "events_push_id_idx";
-- DropIndex
DROP INDEX "messages_brand_id_user_id_idx";

-- The devices of a player, in one brand (the gateway looking up whom to send to) or in all of them
-- (GET /v1/players/:user_id/devices, which the old (brand_id, user_id) order could not serve).
-- DropIndex
DROP INDEX "devices_brand_id_user_id_idx";
-- CreateIndex
CREATE INDEX "devices_user_id_brand_id_idx" ON "devices"("user_id", "brand_id");

-- Retention (libs/db/src/retention.ts): delivered and dead events, and messages, past the age.
-- CreateIndex
CREATE INDEX "events_dispatch_state_occurred_at_idx" ON "events"("dispatch_state", "occurred_at");
-- CreateIndex
CREATE INDEX "messages_created_at_idx" ON "messages"("created_at");
