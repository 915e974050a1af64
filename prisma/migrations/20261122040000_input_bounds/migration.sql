-- Balances add up credits without end: numeric(38,0) cannot overflow where bigint would (the
-- house account's side of every credit in a currency).
-- AlterTable
ALTER TABLE "accounts" ALTER COLUMN "balance_minor" SET DEFAULT 0,
ALTER COLUMN "balance_minor" SET DATA TYPE DECIMAL(38,0);

-- The tuple key is kept as the SHA-256 (hex) of its JSON text, so its unique index holds 64 bytes
-- whatever the size of the headers and user_id. Keys already stored are hashed the same way.
UPDATE "credits" SET "tuple_key" = encode(sha256(convert_to("tuple_key", 'UTF8')), 'hex') WHERE "tuple_key" IS NOT NULL;
