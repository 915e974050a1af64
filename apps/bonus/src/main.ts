// The bonus app: carries out the credits the gateway recorded (through the built-in ledger or the
// operator's platform), expires bonuses past their validity, and writes every bonus and balance
// event to the outbox for the webhook dispatcher. Several instances may run side by side.
import { createBonusDeps, runBonusRound } from '@operator/bonus';
import { ConfigError, createLogger, loadBonusAppConfig, onShutdown } from '@operator/config';
import { closeDb, createDb, createPoller, releaseCredits } from '@operator/db';

async function main() {
  const config = loadBonusAppConfig();
  const log = createLogger('bonus', config.LOG_LEVEL);
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE, log });
  const deps = createBonusDeps(db, config, log);
  log.info({ wallet: config.bonus.platformUrl ? 'platform' : 'ledger' }, 'bonus app started');

  // The credits claimed and not yet processed.
  const held = new Set<string>();
  const poller = createPoller({ what: 'bonus', log, idleMs: config.BONUS_POLL_MS, round: async () => (await runBonusRound(deps, undefined, held)) > 0 });
  poller.start();

  onShutdown({
    log,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    close: async () => {
      await poller.stop();
      await closeDb(db);
    },
    abandon: async () => {
      await releaseCredits(db.pool, [...held]);
    },
  });
}

main().catch((error) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
