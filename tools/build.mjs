// Bundles each app into one file under dist/apps/<name>/main.js (see bundle.mjs).
import { APPS } from './apps.mjs';
import { bundle } from './bundle.mjs';

const only = process.argv.slice(2);
const apps = only.length ? only : APPS;

await Promise.all(apps.map((name) => bundle(`apps/${name}/src/main.ts`, `dist/apps/${name}/main.js`)));
console.log(`built ${apps.join(', ')}`);
