-- What each credit's request asked for (libs/bonus/src/credit.ts, requestFingerprint): a request
-- under the same X-Service-Id or the same activity, action, player and trigger hash must ask the
-- same, or it is answered 409. No release holds credits yet, so the column has no default.
-- AlterTable
ALTER TABLE "credits" ADD COLUMN     "fingerprint" TEXT NOT NULL;
