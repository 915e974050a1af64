// `npm run bench`: builds the apps and the benchmark (see bundle.mjs), makes a fresh database for it,
// then runs it. Sizes come from BENCH_* variables (see tools/bench/main.ts).
import { execFileSync, spawn } from 'node:child_process';
import { bundle } from '../bundle.mjs';
import { ensureDatabase, migrate } from '../db-migrate.mjs';

const url = process.env.BENCH_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_bench';
await ensureDatabase(url, { recreate: true });
migrate(url);
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });
await Promise.all([bundle('tools/bench/main.ts', 'dist/tools/bench/main.js'), bundle('tools/bench/bare.ts', 'dist/tools/bench/bare.js')]);
const child = spawn(process.execPath, ['--enable-source-maps', 'dist/tools/bench/main.js'], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
