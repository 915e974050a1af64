// Builds the gateway and the FCM worker and the send-writes measurement, makes a fresh database for
// it (WRITES_DATABASE_URL), then runs it (see send-writes.ts).
import { execFileSync, spawn } from 'node:child_process';
import { bundle } from '../bundle.mjs';
import { ensureDatabase, migrate } from '../db-migrate.mjs';

const url = process.env.WRITES_DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/operator_api_writes';
await ensureDatabase(url, { recreate: true });
migrate(url);
execFileSync(process.execPath, ['tools/build.mjs', 'gateway', 'push-worker-fcm'], { stdio: 'inherit' });
await bundle('tools/bench/send-writes.ts', 'dist/tools/bench/send-writes.js');
const child = spawn(process.execPath, ['--enable-source-maps', 'dist/tools/bench/send-writes.js'], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
