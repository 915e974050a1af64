-- Money per brand: credits, wallets, ledger entries and player bonuses belong to a brand (the
-- activity.brand_id of the CRM), so the same X-Service-Id or the same player id in two brands is two
-- credits or two wallets. Rows made before this release are brand 0. Adding a column with a
-- constant default rewrites no table. The unique indexes below are built under a lock that holds
-- writes to credits and accounts while they build (see the upgrade note in CHANGELOG.md).

ALTER TABLE "credits" ADD COLUMN "brand_id" BIGINT NOT NULL DEFAULT 0;
ALTER TABLE "accounts" ADD COLUMN "brand_id" BIGINT NOT NULL DEFAULT 0;
ALTER TABLE "ledger_entries" ADD COLUMN "brand_id" BIGINT NOT NULL DEFAULT 0;
ALTER TABLE "player_bonuses" ADD COLUMN "brand_id" BIGINT NOT NULL DEFAULT 0;
-- A catalog entry for one brand, or (NULL) for every brand.
ALTER TABLE "bonuses" ADD COLUMN "brand_id" BIGINT;
-- The brand of a bonus or balance event. Push status events take theirs from their message.
ALTER TABLE "events" ADD COLUMN "brand_id" BIGINT;

-- One credit per X-Service-Id and per activity tuple within a brand.
CREATE UNIQUE INDEX "credits_brand_id_idempotency_key_key" ON "credits"("brand_id", "idempotency_key");
CREATE UNIQUE INDEX "credits_brand_id_tuple_key_key" ON "credits"("brand_id", "tuple_key");
DROP INDEX "credits_idempotency_key_key";
DROP INDEX "credits_tuple_key_key";
-- The credits of a player in some brands or in all of them (the back office).
CREATE INDEX "credits_user_id_brand_id_idx" ON "credits"("user_id", "brand_id");
DROP INDEX "credits_user_id_idx";

-- The bonuses of a player in some brands or in all of them.
CREATE INDEX "player_bonuses_user_id_brand_id_idx" ON "player_bonuses"("user_id", "brand_id");
DROP INDEX "player_bonuses_user_id_idx";

-- One account per brand, owner, currency and kind: the house too has one per brand and currency.
CREATE UNIQUE INDEX "accounts_brand_id_owner_currency_kind_key" ON "accounts"("brand_id", "owner", "currency", "kind");
DROP INDEX "accounts_owner_currency_kind_key";
