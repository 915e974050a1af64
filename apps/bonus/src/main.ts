// The bonus app: carries out the credits the gateway recorded (through the built-in ledger or the
// operator's platform), expires bonuses past their validity, and writes every bonus and balance
// event to the outbox for the webhook dispatcher. Several instances may run side by side.
import { createBonusDeps, runBonusRound } from '@operator/bonus';
import { ConfigError, createLogger, loadBonusAppConfig } from '@operator/config';
import { closeDb, createDb } from '@operator/db';

async function main() {
  const config = loadBonusAppConfig();
  const log = createLogger('bonus', config.LOG_LEVEL);
  const db = createDb({ url: config.DATABASE_URL, poolSize: config.DATABASE_POOL_SIZE });
  const deps = createBonusDeps(db, config, log);
  log.info({ wallet: config.bonus.platformUrl ? 'platform' : 'ledger' }, 'bonus app started');

  let running = true;
  let wake: (() => void) | undefined;
  const loop = (async () => {
    while (running) {
      let handled = 0;
      try {
        handled = await runBonusRound(deps);
      } catch (error) {
        log.error({ err: error }, 'bonus round failed');
      }
      if (running && handled === 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, config.BONUS_POLL_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
  })();

  const shutdown = async (signal: string) => {
    if (!running) return;
    running = false;
    log.info({ signal }, 'shutting down: finishing the credits in flight');
    wake?.();
    await loop;
    await closeDb(db);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
