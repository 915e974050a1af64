-- CreateEnum
CREATE TYPE "DispatchState" AS ENUM ('pending', 'delivered', 'dead');

-- CreateTable
CREATE TABLE "events" (
    "id" UUID NOT NULL,
    "seq" BIGSERIAL NOT NULL,
    "feed_seq" BIGINT,
    "topic" TEXT NOT NULL,
    "ordering_key" TEXT NOT NULL,
    "push_id" UUID,
    "status" TEXT NOT NULL,
    "error" TEXT,
    "body" JSON,
    "occurred_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "dispatch_state" "DispatchState" NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "locked_until" TIMESTAMPTZ(3),
    "expires_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "delivered_at" TIMESTAMPTZ(3),

    CONSTRAINT "events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "events_seq_key" ON "events"("seq");

-- CreateIndex
CREATE UNIQUE INDEX "events_feed_seq_key" ON "events"("feed_seq");

-- CreateIndex
CREATE INDEX "events_dispatch_state_next_attempt_at_idx" ON "events"("dispatch_state", "next_attempt_at");

-- CreateIndex
CREATE INDEX "events_ordering_key_seq_idx" ON "events"("ordering_key", "seq");

-- CreateIndex
CREATE INDEX "events_push_id_idx" ON "events"("push_id");

