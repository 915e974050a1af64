import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

// No module imports itself through others, at file or library level: tools/house-figures.mjs
// finds the circles, and this names each one it finds.
const root = join(__dirname, '../../..');

interface Circle {
  nodes: string[];
  path: string[];
}

function circlesOf(dir: string): { fileCircles: Circle[]; libraryCircles: Circle[] } {
  const out = execFileSync(process.execPath, [join(root, 'tools/house-figures.mjs'), dir, '--json'], { encoding: 'utf8' });
  return JSON.parse(out);
}

function write(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

describe('import circles', () => {
  it('finds none in the repository', () => {
    const found = circlesOf(root);
    expect(found.fileCircles.map((circle) => circle.path.join(' -> '))).toEqual([]);
    expect(found.libraryCircles.map((circle) => circle.path.join(' -> '))).toEqual([]);
  });

  it('finds a circle of types, of relative paths and through a library alias', () => {
    const dir = mkdtempSync(join(tmpdir(), 'import-circles-'));
    try {
      write(dir, {
        'tsconfig.base.json': JSON.stringify({ compilerOptions: { paths: { '@operator/b': ['libs/b/src/index.ts'] } } }),
        'apps/x/src/app.ts': "import type { Route } from './routes';\nexport const app = 1;\n",
        'apps/x/src/routes.ts': "import {\n  app,\n} from './app.js';\nexport type Route = typeof app;\n",
        'apps/x/src/main.ts': "import { app } from './app';\n",
        'libs/a/src/index.ts': "export * from './a';\n",
        'libs/a/src/a.ts': "import { b } from '@operator/b';\nexport const a = b;\n",
        'libs/b/src/index.ts': "export { b } from './b';\n",
        'libs/b/src/b.ts': "export const b = 1;\nexport const late = () => import('../../a/src/index');\n",
        'libs/b/src/b.spec.ts': "import { a } from '../../a/src/a';\n",
      });
      const found = circlesOf(dir);
      expect(found.fileCircles).toEqual([
        { nodes: ['apps/x/src/app.ts', 'apps/x/src/routes.ts'], path: ['apps/x/src/app.ts', 'apps/x/src/routes.ts', 'apps/x/src/app.ts'] },
        {
          nodes: ['libs/a/src/a.ts', 'libs/a/src/index.ts', 'libs/b/src/b.ts', 'libs/b/src/index.ts'],
          path: ['libs/a/src/a.ts', 'libs/b/src/index.ts', 'libs/b/src/b.ts', 'libs/a/src/index.ts', 'libs/a/src/a.ts'],
        },
      ]);
      expect(found.libraryCircles).toEqual([{ nodes: ['a', 'b'], path: ['a', 'b', 'a'] }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
