-- CreateEnum
CREATE TYPE "CreditKind" AS ENUM ('bonus', 'funds');

-- CreateEnum
CREATE TYPE "CreditStatus" AS ENUM ('accepted', 'completed', 'failed');

-- CreateTable
CREATE TABLE "bonuses" (
    "code" TEXT NOT NULL,
    "label" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "product" TEXT NOT NULL,
    "amount_minor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "validity_days" INTEGER NOT NULL,
    "wagering_requirement" DECIMAL(10,2) NOT NULL,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "bonuses_pkey" PRIMARY KEY ("code")
);

-- CreateTable
CREATE TABLE "credits" (
    "id" UUID NOT NULL,
    "idempotency_key" TEXT NOT NULL,
    "tuple_key" TEXT,
    "kind" "CreditKind" NOT NULL,
    "user_id" TEXT NOT NULL,
    "bonus_code" TEXT,
    "amount_minor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "request" JSON NOT NULL,
    "crm_headers" JSONB NOT NULL,
    "status" "CreditStatus" NOT NULL DEFAULT 'accepted',
    "error" TEXT,
    "reference" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "locked_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "credits_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "player_bonuses" (
    "id" UUID NOT NULL,
    "credit_id" UUID NOT NULL,
    "user_id" TEXT NOT NULL,
    "bonus_code" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "product" TEXT NOT NULL,
    "amount_minor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "required_wagering_minor" BIGINT NOT NULL,
    "status" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "player_bonuses_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "accounts" (
    "id" UUID NOT NULL,
    "owner" TEXT NOT NULL,
    "currency" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "balance_minor" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ledger_entries" (
    "id" UUID NOT NULL,
    "transaction_id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "amount_minor" BIGINT NOT NULL,
    "reason" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ledger_entries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "credits_idempotency_key_key" ON "credits"("idempotency_key");

-- CreateIndex
CREATE UNIQUE INDEX "credits_tuple_key_key" ON "credits"("tuple_key");

-- CreateIndex
CREATE INDEX "credits_status_next_attempt_at_idx" ON "credits"("status", "next_attempt_at");

-- CreateIndex
CREATE INDEX "credits_user_id_idx" ON "credits"("user_id");

-- CreateIndex
CREATE UNIQUE INDEX "player_bonuses_credit_id_key" ON "player_bonuses"("credit_id");

-- CreateIndex
CREATE INDEX "player_bonuses_user_id_idx" ON "player_bonuses"("user_id");

-- CreateIndex
CREATE INDEX "player_bonuses_status_expires_at_idx" ON "player_bonuses"("status", "expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "accounts_owner_currency_kind_key" ON "accounts"("owner", "currency", "kind");

-- CreateIndex
CREATE INDEX "ledger_entries_account_id_idx" ON "ledger_entries"("account_id");

-- CreateIndex
CREATE UNIQUE INDEX "ledger_entries_transaction_id_account_id_key" ON "ledger_entries"("transaction_id", "account_id");

-- AddForeignKey
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

