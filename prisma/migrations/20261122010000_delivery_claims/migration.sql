-- AlterEnum
ALTER TYPE "DeliveryStatus" ADD VALUE 'sending';

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "claimed_at" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "deliveries_message_id_provider_status_idx" ON "deliveries"("message_id", "provider", "status");

