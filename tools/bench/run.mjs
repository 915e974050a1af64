// `npm run bench`: builds the apps and the benchmark (see bundle.mjs), makes a fresh database for it,
// then runs it with this script's arguments (`--campaign N`: tools/bench/campaign.ts). Sizes come
// from BENCH_* variables (see tools/bench/main.ts and pg-cost.ts); BENCH_QUICK=1 makes every size small (a run of about two minutes, no old rows) unless set.
import { execFileSync, spawn } from 'node:child_process';
import { bundle } from '../bundle.mjs';
import { ensureDatabase, migrate } from '../db-migrate.mjs';

const url = process.env.BENCH_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_bench';
await ensureDatabase(url, { recreate: true });
migrate(url);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });
await Promise.all([bundle('tools/bench/main.ts', 'dist/tools/bench/main.js'), bundle('tools/bench/bare.ts', 'dist/tools/bench/bare.js')]);
const QUICK = {
  BENCH_SECONDS: '3',
  BENCH_PLAYERS: '500',
  BENCH_BATCHES: '10',
  BENCH_SEND: '2000',
  BENCH_END_TO_END: '5000',
  BENCH_OLD_ROWS: '0',
  BENCH_DISPATCHER_EVENTS: '5000',
};
const env = process.env.BENCH_QUICK === '1' ? { ...QUICK, ...process.env } : process.env;
const child = spawn(process.execPath, ['--enable-source-maps', 'dist/tools/bench/main.js', ...process.argv.slice(2)], { stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
