-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "Provider" AS ENUM ('fcm', 'apns', 'webpush');

-- CreateEnum
CREATE TYPE "Platform" AS ENUM ('android', 'ios', 'web');

-- CreateEnum
CREATE TYPE "MessageStatus" AS ENUM ('accepted', 'sent', 'failed', 'delivered', 'opened', 'clicked');

-- CreateEnum
CREATE TYPE "DeliveryStatus" AS ENUM ('pending', 'sent', 'failed');

-- CreateTable
CREATE TABLE "devices" (
    "id" UUID NOT NULL,
    "brand_id" BIGINT NOT NULL,
    "user_id" TEXT NOT NULL,
    "provider" "Provider" NOT NULL,
    "platform" "Platform",
    "token" TEXT NOT NULL,
    "p256dh" TEXT,
    "auth" TEXT,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "deactivated_at" TIMESTAMPTZ(3),
    "deactivated_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "devices_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "messages" (
    "id" UUID NOT NULL,
    "brand_id" BIGINT NOT NULL,
    "crm_message_id" BIGINT NOT NULL,
    "user_id" TEXT NOT NULL,
    "activity_id" BIGINT NOT NULL,
    "action_group_id" BIGINT NOT NULL,
    "action_id" BIGINT NOT NULL,
    "trigger_hash" TEXT NOT NULL,
    "origin" TEXT,
    "payload" JSON NOT NULL,
    "meta" JSON,
    "crm_headers" JSONB NOT NULL,
    "status" "MessageStatus" NOT NULL DEFAULT 'accepted',
    "error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "messages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "deliveries" (
    "id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "device_id" UUID,
    "provider" "Provider" NOT NULL,
    "status" "DeliveryStatus" NOT NULL DEFAULT 'pending',
    "provider_message_id" TEXT,
    "error_code" TEXT,
    "error" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "sent_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deliveries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "devices_brand_id_user_id_idx" ON "devices"("brand_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "devices_provider_token_key" ON "devices"("provider", "token");

-- CreateIndex
CREATE INDEX "messages_brand_id_user_id_idx" ON "messages"("brand_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "messages_brand_id_crm_message_id_key" ON "messages"("brand_id", "crm_message_id");

-- CreateIndex
CREATE INDEX "deliveries_device_id_idx" ON "deliveries"("device_id");

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_message_id_device_id_key" ON "deliveries"("message_id", "device_id");

-- AddForeignKey
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_device_id_fkey" FOREIGN KEY ("device_id") REFERENCES "devices"("id") ON DELETE SET NULL ON UPDATE CASCADE;

