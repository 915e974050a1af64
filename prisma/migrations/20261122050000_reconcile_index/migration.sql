-- CreateIndex
CREATE INDEX "deliveries_status_provider_updated_at_idx" ON "deliveries"("status", "provider", "updated_at");

