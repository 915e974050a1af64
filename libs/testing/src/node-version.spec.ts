import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// The tests run on the Node the image runs: `npm install` puts the Node 24 LTS binary of
// node-linux-<cpu> in node_modules/.bin, which npm scripts find before the Node that runs npm.
const root = join(__dirname, '../../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const pinned: string = pkg.optionalDependencies[`node-${process.platform}-${process.arch}`] ?? '';

describe('the Node the tests run on', () => {
  (pinned ? it : it.skip)(`is the pinned Node 24 on ${process.platform}-${process.arch}`, () => {
    expect(pinned).toMatch(/^24\./);
    expect(process.versions.node).toBe(pinned);
  });

  it('is the major version the Dockerfile and engines name', () => {
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    const bases = [...dockerfile.matchAll(/^FROM node:(\d+)-[\w-]+@sha256:[0-9a-f]{64}/gm)].map((match) => match[1]);
    expect(bases).toEqual(['24', '24']);
    expect(pkg.engines.node).toMatch(/^>=24\./);
  });
});
