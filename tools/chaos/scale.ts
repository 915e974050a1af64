// How big and how long a run is. `npm run chaos` is the full run, sized for a 2-core machine;
// `--quick` (or CHAOS_SCALE=quick) is the small one for CI.

export interface Scale {
  name: 'full' | 'quick';
  messages: number;
  credits: number;
  players: number;
  /** How long the CRM keeps sending; every fault happens in this window. */
  sendMs: number;
  /** kill -9 of each app, this many times. */
  killsPerApp: number;
  pgCuts: number;
  pgCutMs: number;
  redisCrashes: number;
  /** What the AOF loses at each Redis crash: the writes of the last ... */
  aofLossMs: number;
  /** The CRM's webhooks answer 503 this long, then refuse connections this long. */
  webhook503Ms: number;
  webhookDownMs: number;
  /** After the sending, how long to wait for every message and credit to be final. */
  settleMs: number;
  /** Give up settling when nothing moved for this long. */
  stallMs: number;
  hardTimeoutMs: number;
  /** A duplicate is blamed on a kill only if its first send was at most this long before the kill. */
  inFlightWindowMs: number;
}

export type Load = Pick<Scale, 'messages' | 'credits' | 'players' | 'sendMs' | 'settleMs' | 'stallMs'>;

/** The HA run: the load, and when each store fails over (from the start of the sending). */
export interface HaScale extends Load {
  /** SENTINEL FAILOVER; with a Cluster, kill -9 of the master of push-fcm's slot. */
  redisFailoverAtMs: number;
  /** kill -9 of the Redis master; with a Cluster, of the master of push-apns's slot. */
  redisKillAtMs: number;
  pgFailoverAtMs: number;
  /** Each gateway answers 2xx again within this long of each failover. */
  recoveryMs: number;
  hardTimeoutMs: number;
  inFlightWindowMs: number;
}

export const HA_SCALE: HaScale = {
  messages: 6000,
  credits: 300,
  players: 1000,
  sendMs: 60000,
  redisFailoverAtMs: 15000,
  redisKillAtMs: 35000,
  pgFailoverAtMs: 45000,
  recoveryMs: 30000,
  // Counted from the last fault: every push settled within this.
  settleMs: 180000,
  stallMs: 120000,
  hardTimeoutMs: 600000,
  inFlightWindowMs: 3000,
};

export const SCALES: Record<Scale['name'], Scale> = {
  full: {
    name: 'full',
    messages: 20000,
    credits: 1500,
    players: 3000,
    sendMs: 150000,
    killsPerApp: 3,
    pgCuts: 2,
    pgCutMs: 10000,
    redisCrashes: 1,
    aofLossMs: 1000,
    webhook503Ms: 20000,
    webhookDownMs: 60000,
    settleMs: 240000,
    stallMs: 100000,
    hardTimeoutMs: 720000,
    inFlightWindowMs: 3000,
  },
  quick: {
    name: 'quick',
    messages: 3000,
    credits: 200,
    players: 600,
    sendMs: 45000,
    killsPerApp: 1,
    pgCuts: 2,
    pgCutMs: 4000,
    redisCrashes: 1,
    aofLossMs: 1000,
    webhook503Ms: 8000,
    webhookDownMs: 15000,
    settleMs: 120000,
    stallMs: 65000,
    hardTimeoutMs: 300000,
    inFlightWindowMs: 3000,
  },
};

const USAGE = `usage: npm run chaos [-- --quick] [--messages N] [--credits N] [--send-seconds N] [--seed N] [--keep]
       npm run chaos -- --ha [--cluster] [--messages N] [--credits N] [--seed N] [--keep]
  --quick           the small run (CI); also CHAOS_SCALE=quick
  --ha              the HA run: Sentinel, PostgreSQL standby behind PgBouncer, two of every app
  --cluster         with --ha: Redis Cluster (three masters) instead of Sentinel
  --messages N      pushes the CRM sends (full 20000, quick 3000)
  --credits N       credits the CRM sends (full 1500, quick 200)
  --send-seconds N  how long the sending (and the faults) last (full 150, quick 45)
  --seed N          replay a run's random choices
  --keep            keep the temporary directory (app logs, redis files)`;

export interface Options {
  scale: Scale;
  seed: number;
  keep: boolean;
}

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  const name = argv.includes('--quick') || env.CHAOS_SCALE === 'quick' ? 'quick' : 'full';
  return parseArgs(argv, { ...SCALES[name] }, ['--quick']);
}

export interface HaOptions {
  scale: HaScale;
  seed: number;
  keep: boolean;
  cluster: boolean;
}

export function parseHaOptions(argv: string[]): HaOptions {
  const { scale, seed, keep } = parseArgs(argv, { ...HA_SCALE }, ['--ha', '--cluster']);
  return { scale, seed, keep, cluster: argv.includes('--cluster') };
}

function parseArgs<S extends Load>(argv: string[], scale: S, flags: string[]): { scale: S; seed: number; keep: boolean } {
  let seed = Math.floor(Math.random() * 2 ** 31);
  let keep = false;
  const number = (flag: string, value: string | undefined) => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} needs a positive number\n${USAGE}`);
    return n;
  };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    if (flags.includes(flag)) continue;
    else if (flag === '--keep') keep = true;
    else if (flag === '--messages') scale.messages = Math.floor(number(flag, argv[++i]));
    else if (flag === '--credits') scale.credits = Math.floor(number(flag, argv[++i]));
    else if (flag === '--send-seconds') scale.sendMs = number(flag, argv[++i]) * 1000;
    else if (flag === '--seed') seed = Math.floor(number(flag, argv[++i]));
    else if (flag === '--help' || flag === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown option ${flag}\n${USAGE}`);
  }
  return { scale, seed, keep };
}
