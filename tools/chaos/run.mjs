// `npm run chaos [-- --quick | --ha [--cluster] | --hostile [--proxy]]`: builds the apps and the
// suite (esbuild, as tools/build.mjs does), then runs the suite with the given options.
import { execFileSync, spawn } from 'node:child_process';
import { bundle } from '../bundle.mjs';

const args = process.argv.slice(2);
const suite = args.includes('--ha') ? 'ha' : args.includes('--hostile') ? 'hostile' : 'main';
execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });
await bundle(`tools/chaos/${suite}.ts`, `dist/tools/chaos/${suite}.js`);
const child = spawn(process.execPath, ['--enable-source-maps', `dist/tools/chaos/${suite}.js`, ...args], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
