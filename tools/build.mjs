// Bundles each app into one file under dist/apps/<name>/main.js. Libraries of the workspace are
// bundled in; npm packages stay external and load from node_modules.
import { build } from 'esbuild';
import { APPS } from './apps.mjs';

const only = process.argv.slice(2);
const apps = only.length ? only : APPS;

await Promise.all(
  apps.map((name) =>
    build({
      entryPoints: [`apps/${name}/src/main.ts`],
      outfile: `dist/apps/${name}/main.js`,
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      packages: 'external',
      sourcemap: true,
      tsconfig: 'tsconfig.base.json',
      logLevel: 'warning',
    }),
  ),
);
console.log(`built ${apps.join(', ')}`);
