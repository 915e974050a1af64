// One way to bundle an entry point of the workspace into a single CommonJS file: libraries of the
// workspace are bundled in, npm packages stay external and load from node_modules (so the output
// must sit inside the repository). The result carries esbuild's metafile: what went in, what the
// output requires (bundle-report.mjs reads it).
import { build } from 'esbuild';

export function bundle(entry, outfile) {
  return build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    packages: 'external',
    sourcemap: true,
    tsconfig: 'tsconfig.base.json',
    logLevel: 'warning',
    metafile: true,
  });
}
