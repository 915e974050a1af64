-- Huawei Push Kit and OneSignal devices and deliveries.
ALTER TYPE "Provider" ADD VALUE IF NOT EXISTS 'hms';
ALTER TYPE "Provider" ADD VALUE IF NOT EXISTS 'onesignal';
