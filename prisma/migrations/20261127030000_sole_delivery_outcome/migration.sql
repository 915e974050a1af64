-- A push of one device records the outcome of its only delivery on itself, in the update that
-- settles it, instead of inserting a delivery row: one row write less a push (see
-- recordSoleOutcomes in libs/db/src/deliveries.ts). Null for pushes of several devices, whose
-- outcomes stay delivery rows, and for pushes accepted or tried before this migration.
-- AlterTable
ALTER TABLE "messages" ADD COLUMN     "attempts" INTEGER,
ADD COLUMN     "error_code" TEXT,
ADD COLUMN     "error_detail" TEXT,
ADD COLUMN     "provider_message_id" TEXT,
ADD COLUMN     "sent_at" TIMESTAMPTZ(3);
