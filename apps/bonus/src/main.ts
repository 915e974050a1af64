// The bonus app: carries out the credits the gateway recorded, expires bonuses, and writes bonus and
// balance events to the outbox. Several instances may run side by side.
import { createBonusDeps, runBonusRound } from '@operator/bonus';
import { createLogger, loadBonusAppConfig, onShutdown, runMain, urlOrigin } from '@operator/config';
import { closeDb, closeReads, countCreditsByState, createDb, createPoller, createReads, pingDb, releaseCredits, startPartitionKeeper } from '@operator/db';
import { MetricsPortError, startMetricsServer, STORE_READ_TIMEOUT_MS, watchStores } from '@operator/metrics';

async function main() {
  const config = loadBonusAppConfig();
  const log = createLogger('bonus', config.LOG_LEVEL);
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  // Only the gauge reads there: two connections are plenty.
  const reads = createReads(db, { url: config.DATABASE_READ_URL, primaryUrl: config.DATABASE_URL, poolSize: 2, label: urlOrigin(config.DATABASE_READ_URL), log });
  const deps = createBonusDeps(db, config, log);
  const metrics = await startMetricsServer({
    port: config.METRICS_PORT,
    checks: { postgres: () => pingDb(db) },
    stores: watchStores({ credits: () => reads.run((replica) => countCreditsByState(replica, STORE_READ_TIMEOUT_MS)) }, { log }),
  });
  log.info({ wallet: config.bonus.platformUrl ? 'platform' : 'ledger', readReplica: reads.separate ? urlOrigin(config.DATABASE_READ_URL) : undefined, metricsPort: metrics.port }, 'bonus app started');

  const held = new Set<string>();
  const poller = createPoller({ what: 'bonus', log, idleMs: config.BONUS_POLL_MS, round: async () => (await runBonusRound(deps, undefined, held)) > 0 });
  poller.start();
  const partitions = startPartitionKeeper({ db, log });

  onShutdown({
    log,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    close: async () => {
      metrics.shuttingDown();
      await Promise.all([poller.stop(), partitions.stop()]);
      await deps.wallet.close?.();
      await closeReads(reads);
      await closeDb(db);
      await metrics.close();
    },
    abandon: async () => {
      // Emptied first: the round in flight starts none of them after this.
      const unstarted = [...held];
      held.clear();
      await releaseCredits(db.pool, unstarted, deps.owner);
    },
  });
}

runMain(main, MetricsPortError);
