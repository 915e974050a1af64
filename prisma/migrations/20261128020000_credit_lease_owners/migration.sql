-- Which bonus app process a credit's lease (locked_until) belongs to: a credit is posted to the
-- wallet platform only by the process that took it in the statement that starts the post, and only
-- that process puts it off or fails it (libs/db/src/credits.ts, holdCreditForPost).
-- AlterTable
ALTER TABLE "credits" ADD COLUMN     "lease_owner" UUID;
