// `npm run chaos [-- --quick ...]`: builds the apps and the suite (esbuild, as tools/build.mjs
// bundles the apps), then runs the suite with the given options.
import { execFileSync, spawn } from 'node:child_process';
import { bundle } from '../bundle.mjs';

execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });
await bundle('tools/chaos/main.ts', 'dist/tools/chaos/main.js');
const child = spawn(process.execPath, ['--enable-source-maps', 'dist/tools/chaos/main.js', ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
