-- A delivery names its device without a foreign key. The key's check locked the device's row at
-- every delivery insert (a WAL record and a dirtied page per message, and contention when many
-- messages go to one player), and its ON DELETE SET NULL needed an index of deliveries by device
-- written at every insert. A delivery whose device was removed is found by the claim's lookup of
-- the device, which finds none, exactly as the null left by the old key: it fails as device-inactive.
ALTER TABLE "deliveries" DROP CONSTRAINT "deliveries_device_id_fkey";
DROP INDEX "deliveries_device_id_idx";
