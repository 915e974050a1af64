// Bundles every app as build.mjs does, into another directory of the repository (default
// dist/bundle-check), and prints as JSON what each bundle needs at run time: the npm packages and
// node: modules it requires (dynamic imports too), and the workspace projects its import graph reaches.
// A provider's descriptor.ts (name, settings, device check: no client, no SDK) is read by every app
// through the registry: it is listed under `descriptors`, and counts for no project.
//   node tools/bundle-report.mjs [outdir]
import { APPS } from './apps.mjs';
import { bundle } from './bundle.mjs';

const outdir = process.argv[2] ?? 'dist/bundle-check';
const DESCRIPTOR = /^libs\/provider-[^/]+\/src\/descriptor\.ts$/;

function packageName(path) {
  if (path.startsWith('node:')) return path;
  const parts = path.split('/');
  return path.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const report = {};
for (const app of APPS) {
  const outfile = `${outdir}/${app}/main.js`;
  const { metafile } = await bundle(`apps/${app}/src/main.ts`, outfile);
  const output = metafile.outputs[outfile];
  const requires = output.imports.filter((item) => item.external).map((item) => packageName(item.path));
  const inputs = Object.keys(metafile.inputs);
  const projects = inputs.filter((input) => !DESCRIPTOR.test(input)).flatMap((input) => input.match(/^(?:apps|libs)\/[^/]+/) ?? []);
  const descriptors = inputs.filter((input) => DESCRIPTOR.test(input)).sort();
  report[app] = { requires: [...new Set(requires)].sort(), projects: [...new Set(projects)].sort(), descriptors };
}
console.log(JSON.stringify(report, null, 2));
